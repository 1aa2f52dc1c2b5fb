"""The README is a front door of one screen whose set-up commands are the ones CI runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 200


def setup_commands(text: str) -> list[str]:
    """The lines that make a virtual environment and run something: the set-up commands."""
    return [line.strip() for line in text.splitlines()
            if line.strip().startswith("python3 -m venv .venv && ")]


def test_readme_is_one_screen_of_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, \
        f"README.md has {len(lines)} lines; the rest belongs in docs/ (at most {MAX_README_LINES})"


def test_readme_has_the_quick_look_first_then_the_two_set_up_commands_and_ci_runs_the_test_one():
    quick, run, test = setup_commands(README.read_text(encoding="utf-8"))
    assert "s2s profile quick" in quick and "pip install -e ." in quick
    assert run.endswith(" dvc repro") and "pip install -e ." in run
    assert test.endswith(" pytest") and "'.[test,cluster]'" in test
    ci = setup_commands((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert ci == [test], f".ci/run runs {ci}, the README says {test!r}"


# -- links between the Markdown files: every relative target and #section exists ----------------

DOCS = [README, ROOT / "reports" / "README.md", ROOT / "reports" / "default" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces -> '-'."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_slug_is_githubs():
    assert slug("Scoring: `s2s score`") == "scoring-s2s-score"
    assert slug("The default profile, and why it is Multi30k") \
        == "the-default-profile-and-why-it-is-multi30k"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_section(doc):
    broken = []
    for target in links(doc):
        file, _, section = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{target}: no {dest.relative_to(ROOT)}")
        elif section and dest.suffix == ".md" and section not in anchors(dest):
            broken.append(f"{target}: no section #{section} in {dest.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readmes_headline_table_is_generated_from_the_published_metrics():
    from s2s.report import headline

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    want = headline.replace_block(readme, headline.render(ROOT), source="README.md")
    assert readme == want, "README.md's headline is stale: run `python -m s2s.report.headline`"
    assert "| Table 1: Ensemble of 5 reversed LSTMs, beam size 12 |" in readme
    with pytest.raises(ValueError, match="expected one"):
        headline.replace_block("no markers", "x", source="README.md")


def test_every_module_docs_architecture_md_names_exists():
    """The map of the code names real files: every `<path>.py` or `<folder>/` of the package in
    its tables and its tree (package-relative, as it writes them), and every `src/...` path."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = ROOT / "src" / "s2s"
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_0-9]+\.py)`", text))
    tree = FENCE.findall(text)
    for block in tree:
        for line in block.splitlines():
            m = re.match(r"\s{2}(\S+)", line)
            if m and (m[1].endswith(".py") or m[1].endswith("/")):
                named |= {w for w in line[:25].split() if w.endswith((".py", "/"))}
    assert len(named) >= 40, sorted(named)
    missing = [n for n in sorted(named)
               if not (package / n).exists() and not (ROOT / n).exists()]
    assert not missing, f"docs/architecture.md names what is not in the package: {missing}"
    for src in re.findall(r"`(src/s2s/[^`{}<>*]+)`", text):
        assert (ROOT / src).exists(), src
