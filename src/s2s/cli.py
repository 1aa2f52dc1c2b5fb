"""`s2s`: one console script, a subcommand per pipeline stage.

dvc.yaml calls these subcommands and passes every path, so the paths are written once, there.
Stage modules are imported inside each subcommand: `s2s profile` or `s2s download` never pay for
importing torch.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from pathlib import Path

from s2s.config import NAME_PATTERN, NAME_RULE, PARAMS_FILE, ConfigError, load
from s2s.runguard import Stopped

log = logging.getLogger("s2s")

PROFILES_DIR = Path("profiles")


def _cmd_check(a, params):
    """The params stage: main() has validated the whole file by now; record that it passed.
    The content is constant, so a valid change reruns nothing that depends on it."""
    from s2s.io import atomic_write_json

    atomic_write_json(a.out, {"valid": True, "name_pattern": NAME_PATTERN.pattern})
    log.info("%s is valid; wrote %s", a.params, a.out)


def _cmd_download(a, params):
    from s2s.data import download

    mirror = os.environ.get("S2S_MIRROR")
    download.main(params.data, out_dir=a.out, mirror=Path(mirror) if mirror else None)


def _cmd_prepare(a, params):
    from s2s.data import prepare

    prepare.main(params.data, params.prepare, raw_dir=a.raw, out_dir=a.out, metrics_out=a.metrics)


def _cmd_vocab(a, params):
    from s2s.data import vocab

    vocab.main(params.vocab, prepared_dir=a.prepared, out_dir=a.out, metrics_out=a.metrics)


def _cmd_train(a, params):
    params.model_config(a.name)  # an unknown model fails before any work (and importing torch)
    from s2s import train

    train.main(params, a.name, prepared_dir=a.prepared, vocab_dir=a.vocab, model_dir=a.model_dir,
               ckpt_dir=a.ckpt_dir, metrics_out=a.metrics, curves_out=a.curves,
               stop_after=a.stop_after)


def _cmd_translate(a, params):
    from s2s.decode import translate

    translate.main(params, a.system, prepared_dir=a.prepared, vocab_dir=a.vocab,
                   models_dir=a.models, out_dir=a.out)


def _cmd_rescore(a, params):
    from s2s.decode import rescore

    rescore.main(params, a.rescorer, translate_dir=a.translate, raw_dir=a.raw,
                 prepared_dir=a.prepared, vocab_dir=a.vocab, models_dir=a.models, out_dir=a.out)


def _cmd_evaluate(a, params):
    from s2s.evaluate import stage

    stage.main(params, translate_dir=a.translate, rescore_dir=a.rescore, prepared_dir=a.prepared,
               vocab_dir=a.vocab, metrics_out=a.metrics, groups_out=a.groups)


def _cmd_report(a, params):
    from s2s.report import stage

    stage.main(params, metrics_dir=a.metrics, translate_dir=a.translate, groups_csv=a.groups,
               manifest=a.manifest, out_dir=a.out, attention=a.attention, analysis=a.analysis)


def _cmd_analyze(a, params):
    from s2s.analysis import stage

    cfg = params.analysis
    stage.main(models=cfg.models, phrases=cfg.phrases, sentences=cfg.sentences,
               max_position=cfg.max_position, prepared_dir=a.prepared, vocab_dir=a.vocab,
               models_dir=a.models, out_dir=a.out, lowercase=params.prepare.lowercase,
               expect={m: params.model_config(m) for m in cfg.models})


def _cmd_attention(a, params):
    if params.analysis.attention_system is None:
        raise ConfigError(f"{params.source}: 'analysis.attention_system' is null: no attention "
                          f"system to draw")
    from s2s.analysis import alignments

    alignments.main(params, prepared_dir=a.prepared, vocab_dir=a.vocab, models_dir=a.models,
                    translate_dir=a.translate, out=a.out)


def _cmd_profile(a, params_path: Path):
    """Copy profiles/<name>.yaml over params.yaml; DVC then reruns what the change touches."""
    available = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    if a.name is None:
        current = load(params_path).profile if params_path.exists() else "none"
        print(f"current profile: {current}\navailable: {', '.join(available)}")
        return
    if not NAME_PATTERN.fullmatch(a.name):  # never a path outside profiles/ (../x, /etc/x)
        raise ConfigError(f"'{a.name}' is not a profile name ({NAME_RULE}; available: "
                          f"{', '.join(available)})")
    src = PROFILES_DIR / f"{a.name}.yaml"
    if not src.exists():
        raise ConfigError(f"no profile '{a.name}' in {PROFILES_DIR}/ "
                          f"(available: {', '.join(available)})")
    load(src)  # never switch to a profile that does not validate
    tmp = params_path.with_name(f".{params_path.name}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, params_path)
    print(f"{params_path} is now profile '{a.name}' (from {src}); run `dvc repro`")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="s2s", description=__doc__.splitlines()[0])
    p.add_argument("--params", type=Path, default=Path(PARAMS_FILE), help="parameter file")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def stage(name, fn, help):
        sp = sub.add_parser(name, help=help)
        sp.set_defaults(fn=fn)
        return sp

    s = stage("check", _cmd_check, "validate the parameter file (the params stage)")
    s.add_argument("--out", type=Path, required=True)
    s = stage("download", _cmd_download, "fetch the corpora (or copy them from $S2S_MIRROR)")
    s.add_argument("--out", type=Path, required=True)
    s = stage("prepare", _cmd_prepare, "normalise, filter, tokenise")
    s.add_argument("--raw", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--metrics", type=Path, required=True)
    s = stage("vocab", _cmd_vocab, "build the vocabularies")
    s.add_argument("--prepared", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--metrics", type=Path, required=True)
    s = stage("train", _cmd_train, "train one model of params `models`")
    s.add_argument("name")
    for flag in ("--prepared", "--vocab", "--model-dir", "--ckpt-dir", "--metrics", "--curves"):
        s.add_argument(flag, type=Path, required=True)
    s.add_argument("--stop-after", type=int, default=None, help=argparse.SUPPRESS)
    s = stage("translate", _cmd_translate, "decode the test set with one system of `systems`")
    s.add_argument("system")
    for flag in ("--prepared", "--vocab", "--models", "--out"):
        s.add_argument(flag, type=Path, required=True)
    s = stage("rescore", _cmd_rescore, "rescore the baseline's n-best lists")
    s.add_argument("rescorer")
    for flag in ("--translate", "--raw", "--prepared", "--vocab", "--models", "--out"):
        s.add_argument(flag, type=Path, required=True)
    s = stage("evaluate", _cmd_evaluate, "BLEU (tokenised and sacreBLEU) and Figure 3 groups")
    for flag in ("--translate", "--rescore", "--prepared", "--vocab", "--metrics", "--groups"):
        s.add_argument(flag, type=Path, required=True)
    s = stage("analyze", _cmd_analyze, "Figure 2, forget gates and gradient reach of `analysis`")
    for flag in ("--prepared", "--vocab", "--models", "--out"):
        s.add_argument(flag, type=Path, required=True)
    s = stage("attention", _cmd_attention, "attention weights of an attention system's output")
    for flag in ("--prepared", "--vocab", "--models", "--translate", "--out"):
        s.add_argument(flag, type=Path, required=True)
    s = stage("report", _cmd_report, "reports/report.md and .html")
    for flag in ("--metrics", "--translate", "--groups", "--manifest", "--out"):
        s.add_argument(flag, type=Path, required=True)
    s.add_argument("--attention", type=Path, help="the attention stage's weights.json")
    s.add_argument("--analysis", type=Path, help="the analyze stage's folder")
    s = sub.add_parser("profile", help="show or switch the parameter profile")
    s.add_argument("name", nargs="?")
    s.set_defaults(fn=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    try:
        if args.command == "profile":
            _cmd_profile(args, args.params)
            return 0
        params = load(args.params)  # the whole file is validated before any stage works
        args.fn(args, params)
    except KeyboardInterrupt:
        log.error("interrupted")
        return 130
    except Stopped as e:  # a signal, after a final checkpoint: one line, status 128 + N
        log.error("%s", e)
        return e.exit_status
    except (ValueError, RuntimeError, KeyError, OSError) as e:
        # Bad input, bad params, a bad checkpoint: one clear line; the traceback with -v.
        if args.verbose:
            raise
        log.error("%s: %s (run with -v for the traceback)", type(e).__name__, e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
