"""The README is a front door of one screen whose set-up commands are the ones CI runs."""

from pathlib import Path

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


def test_readme_has_the_two_set_up_commands_and_ci_runs_the_test_one():
    run, test = setup_commands(README.read_text(encoding="utf-8"))
    assert run.endswith(" dvc repro") and "pip install -e ." in run
    assert test.endswith(" pytest") and "'.[test]'" in test
    ci = setup_commands((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert ci == [test], f".ci/run runs {ci}, the README says {test!r}"
