"""Stage `export`: every system as a folder that translates without the pipeline's folders.

Reads:  ``<models>/<member>/model.pt`` of every system's members, ``<vocab>/{en,fr}.tsv``,
        ``<prepared>/train.tok.{en,fr}`` (their fingerprints), params of everything a
        translation depends on.
Writes: ``<out>/<system>/``: checkpoints, vocabularies, the text and decoding settings and
        fingerprints; ``s2s translate-text --system exports/<system>`` reads it
        (:mod:`s2s.api`).
"""

from __future__ import annotations

from s2s import arch
from s2s.config import Params
from s2s.dag import Arg, Stage, command
from s2s.layout import ExportPaths, prepared_names

HELP = ("write every system as a self-contained folder (checkpoints, vocabularies, text and "
        "decoding settings, fingerprints)")
ARGS = (Arg("--models", "models"), Arg("--vocab", "data/vocab"), Arg("--prepared", "data/prepared"),
        Arg("--out", "exports", writes=True, help="folder of the exports, one per system"))
PATHS = ExportPaths  # ARGS as one value, which cli builds and main takes


def stages(params: Params) -> list[Stage]:
    return [command(
        "export", "export", ARGS, parts={"--prepared": prepared_names("train")},
        params=("profile", "data", "prepare", "vocab", "model", "models", "train", "translate",
                "systems"),
        code=arch.modules(params, {m: None for s in params.systems.values() for m in s.members},
                          part="config"),  # each member's config record
        doc="Every system as one folder that translates without the pipeline's folders:\n"
            "`s2s translate-text --system exports/ensemble5` (src/s2s/api.py).")]


def cli(args, params) -> None:
    main(params, ExportPaths.from_args(args))


def main(params: Params, paths: ExportPaths) -> dict:
    from s2s import exporting

    return exporting.export_all(params, paths)
