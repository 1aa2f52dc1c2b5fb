"""The profiles of ``profiles/`` and the complete ``params.yaml`` that ``s2s profile NAME`` writes.

A profile is a complete parameter file or a base plus differences (``extends``/``remove``,
resolved by :func:`s2s.config.resolved`, which :func:`s2s.config.load` runs on every file it
reads). DVC reads params.yaml's keys itself, so the file written is always complete: the keys
resolved, in the order and with the comments of the complete base.
"""

from __future__ import annotations

import io
from pathlib import Path

from ruamel.yaml import YAML

from s2s.config import NAME_PATTERN, NAME_RULE, ConfigError, read_yaml, resolved

PROFILES_DIR = Path("profiles")


def available(folder: Path = PROFILES_DIR) -> list[str]:
    """The names of the profiles in `folder`."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def path_of(name: str, folder: Path = PROFILES_DIR) -> Path:
    """The file of profile `name`; ConfigError for a name that is not one of `folder`'s, never a
    path outside it (``../x``, ``/etc/x``)."""
    names = ", ".join(available(folder))
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"'{name}' is not a profile name ({NAME_RULE}; available: {names})")
    path = folder / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"no profile '{name}' in {folder}/ (available: {names})")
    return path


def profile_text(src: Path) -> str:
    """The complete parameter file profile `src` stands for: a complete profile's own text (its
    comments kept), or a header naming the profiles it resolves from and the resolved keys, in
    the order and with the comments of its base where the base has them."""
    chain: list[Path] = []
    want = resolved(src, chain=chain)
    if want.get("profile") != src.stem:  # the name the report, the summary and `s2s profile` show
        where = next((f" (from {p})" for p in chain if "profile" in read_yaml(p)), "")
        raise ConfigError(f"{src}: 'profile' is {want.get('profile')!r}{where}, not the file's "
                          f"name: set `profile: {src.stem}` in it")
    if len(chain) == 1:
        return src.read_text(encoding="utf-8")
    raw = read_yaml(src)
    rt = YAML()  # round trip: the base's comments and flow-style entries survive
    rt.width = 4096
    doc = rt.load(chain[-1].read_text(encoding="utf-8"))
    _assign(doc, want)
    out = io.StringIO()
    rt.dump(doc, out)
    header = (f"# Written by `s2s profile {raw.get('profile') or src.stem}`: "
              + " + ".join(f"{p.parent.name}/{p.name}" for p in reversed(chain)) + ", resolved.\n"
              "# Edit the profile, not this file; the comments below are the base's.\n")
    return header + out.getvalue()


def _assign(doc, want) -> None:
    """Make the round-trip mapping `doc` hold `want`: keys missing from `want` removed, changed
    values replaced, mappings updated in place (their comments and style kept)."""
    for k in [k for k in doc if k not in want]:
        del doc[k]
    for k, v in want.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            _assign(doc[k], v)
        elif k not in doc or doc[k] != v:
            doc[k] = v


def edited_keys(params_path: Path, profile: Path) -> list[str]:
    """The dotted keys whose values differ between a parameter file and the complete file of a
    profile (none if either is missing): what `dvc exp run -S` or a hand edit changed."""
    if not (params_path.is_file() and profile.is_file()):
        return []

    def flat(value, prefix=""):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from flat(v, f"{prefix}{k}.")
        else:
            yield prefix.rstrip("."), value

    a, b = dict(flat(read_yaml(params_path))), dict(flat(resolved(profile)))
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def describe(current: str, params_path: Path, folder: Path = PROFILES_DIR) -> str:
    """Which profile `params_path` holds (`current`), whether it was edited since, and the
    profiles of `folder`: what ``s2s profile`` prints."""
    edited = edited_keys(params_path, folder / f"{current}.yaml")
    note = "" if not edited else (
        f" (edited since: {len(edited)} key(s) differ from {folder}/{current}.yaml: "
        f"{', '.join(edited[:5])}{', ...' if len(edited) > 5 else ''})")
    return f"current profile: {current}{note}\navailable: {', '.join(available(folder))}"
