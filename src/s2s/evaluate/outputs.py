"""Where the translate and rescore stages' outputs are, and how the evaluate stage names them."""

from __future__ import annotations

from pathlib import Path

RESCORE_FIXED = ("baseline", "oracle")  # written by the rescore stage besides the rescorers


def rescore_system(name: str) -> str:
    """The ``system`` value of a rescoring output in the groups table."""
    return f"rescore/{name}"


def find_rescore_output(rescore_dir: Path, name: str) -> Path | None:
    """The stem (without ``.tok.fr``) of rescoring output ``name``, flat or one folder down."""
    candidates = [rescore_dir / name, rescore_dir / name / name, rescore_dir / "oracle" / name,
                  *sorted(p.with_name(name) for p in rescore_dir.glob(f"*/{name}.tok.fr"))]
    for stem in candidates:
        if stem.with_name(stem.name + ".tok.fr").is_file():
            return stem
    return None
