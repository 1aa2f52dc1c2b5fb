"""`s2s`: one console script, a subcommand per pipeline stage (`s2s <stage>` runs
``s2s.stages.<stage>``), and the tools around them (translate-text, score, profile, dag).

It parses and dispatches. A stage's path flags default to what dvc.yaml passes (both from the
stage module's declaration, s2s.dag.Arg), and the stage sees only the params keys its dvc.yaml
entry declares. A stage run by hand, `s2s profile NAME` and `s2s dag write` hold the project
lock while they write (s2s.projectlock): one writer per project, beside `dvc repro` and Snakemake.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import stat
import sys
from pathlib import Path

from s2s import profiles, projectlock, stages
from s2s.config import PARAMS_FILE, ConfigError, load, only
from s2s.runguard import Stopped

log = logging.getLogger("s2s")

DVC_YAML = Path("dvc.yaml")
# The parameter file a stage reads where --params is not given: the Snakemake workflow sets it
# for its jobs (`--config params=...`), outside the rule's params, which Snakemake compares: a
# `--params` in the command reran every job when another file held the same parameters.
PARAMS_ENV = "S2S_PARAMS"


def _read_input(path: Path | None) -> list[str]:
    """Raw sentences from a file or stdin; invalid UTF-8 names the file (or <stdin>) and line.

    Lines end at LF (the CR of a CR LF is dropped), as sacreBLEU and the Moses scripts read a
    file, and as `prepare` and `s2s score` read theirs: a CR inside a line is not a line end, so
    that the translations keep the line numbers of any reference read the same way. A line that
    holds one (a file of old Mac line ends, CR only, is one long line) is warned of on stderr,
    naming the file and its first such line."""
    from s2s.io import read_text

    where = str(path) if path is not None else "<stdin>"
    if path is not None:
        text = read_text(path)  # a file, or a pipe (-i <(...)): _check_input checked it
    else:
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            raise ValueError(f"<stdin>:{line}: not valid UTF-8 "
                             f"({e.reason} at byte {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    with_cr = [n for n, ln in enumerate(lines, 1) if "\r" in ln]
    if with_cr:
        log.warning("%s:%d: a carriage return (CR) inside the line (%s): lines end at LF "
                    "only, as sacreBLEU and Moses read them, so each is translated as one "
                    "sentence; a file of old Mac line ends (CR only)? convert it first: "
                    "tr '\\r' '\\n'", where, with_cr[0],
                    "1 line holds one" if len(with_cr) == 1 else f"{len(with_cr)} lines hold one")
    return lines


def _check_line_lengths(lines: list[str], where: str) -> None:
    """Refuse a line of more words than prepare allows in dev and test (a file that lost its line
    breaks), naming the file and line; --long-lines translates it anyway."""
    from s2s.data.prepare import LOST_BREAKS, MAX_EVAL_WORDS, long_line

    if (found := long_line(lines)) is not None:
        n, words = found
        raise ValueError(f"{where}:{n}: a line of {words:,} words (at most {MAX_EVAL_WORDS:,}: "
                         f"{LOST_BREAKS}); --long-lines translates it anyway")


def _stdio_or_path(text: str) -> Path | None:
    """An argparse type for -i/-o: `-` is stdin or stdout (None), as for Unix tools; a file
    named `-` is ./-."""
    return None if text == "-" else Path(text)


_TEXT_DEFAULTS = {"--models": "models", "--vocab": "data/vocab"}  # translate-text's folders


def _check_input(path: Path | None) -> None:
    """Refuse an -i that is not there, or a folder (a pipe, -i <(...), is read)."""
    if path is None:
        return
    if not path.exists():
        raise FileNotFoundError(f"-i {path}: no such file")
    if path.is_dir():
        raise IsADirectoryError(f"-i {path}: a folder, not a file of sentences")


# the folder of a process's open files: /proc/<pid>/fd (or a thread's), where /dev/fd leads
_FD_FOLDER = re.compile(r"/proc/[^/]+(?:/task/[^/]+)?/fd")


def _names_a_descriptor(path: Path) -> bool:
    """Whether `path`, or a link on the way from it to its file, is an entry of /proc/<pid>/fd
    (/dev/stdout, /dev/fd/N, a link to /proc/self/fd/1): a file some process holds open, which a
    shell may be appending to (`>> log`), not a name to replace."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on links followed
        folder = os.path.realpath(os.path.dirname(p))
        if _FD_FOLDER.fullmatch(folder):
            return True
        if not os.path.islink(p):
            return False
        p = os.path.join(folder, os.readlink(p))
    return False


def _output_target(path: Path) -> tuple[Path, bool]:
    """Where -o writes, and how: (`path`, True) to write straight into it where it is there and,
    its links followed, no regular file (a FIFO, a device such as /dev/null, a shell's
    `>(...)` /dev/fd/N) or an open file's descriptor (/dev/stdout); else (the file, False) to
    write a temporary beside the file and rename it into place: `path` itself, or the file its
    link names, so that the link stays a link."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    if mode is not None and not stat.S_ISDIR(mode) and (
            not stat.S_ISREG(mode) or _names_a_descriptor(path)):
        return path, True
    return (Path(os.path.realpath(path)) if os.path.islink(path) else path), False


def _check_output(path: Path | None) -> None:
    """Refuse an -o that cannot be written before anything is loaded or decoded: a folder, a
    FIFO or device not open to us for writing, or a file in a folder that is not there (a
    mistyped one is not made) or that we cannot create files in (the file is written beside it
    and renamed); a link is checked at the file it names."""
    if path is None:
        return
    if path.is_dir():
        raise IsADirectoryError(f"-o {path}: a folder, not a file to write the translations to")
    target, straight = _output_target(path)
    if straight:
        if not os.access(path, os.W_OK):
            raise PermissionError(f"-o {path}: not writable")
        return
    said = f"-o {path}" if target == path else f"-o {path} (a link to {target})"
    parent = target.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"{said}: {parent} is not a folder" if parent.exists()
                                else f"{said}: no folder {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"{said}: the folder {parent} is not writable (the translations "
                              f"are written to a new file there, then renamed into place)")


def _write_output(path: Path | None, lines: list[str]) -> None:
    """Write `lines` to stdout (`path` None) or to -o `path`: straight into a FIFO, a device or
    an open file's descriptor (appended, as a shell's `>>` would), else atomically at the file
    (a link's file: the link stays)."""
    if path is None:
        sys.stdout.write("".join(f"{ln}\n" for ln in lines))
        sys.stdout.flush()
        return
    from s2s.io import atomic_write_lines, naming

    target, straight = _output_target(path)
    if not straight:
        atomic_write_lines(target, lines)
        return
    with naming(path):  # a reader gone (EPIPE) or a full disk names the path
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))  # no O_CREAT: never a file where none is
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(f"{ln}\n" for ln in lines))


def _cmd_translate_text(a, params_path: Path):
    import time

    from s2s import api
    from s2s.layout import nbest_line

    t0 = time.perf_counter()
    _check_input(a.input)
    _check_output(a.output)
    if not (Path(a.system) / api.EXPORT_FILE).is_file():  # a system of params: read from these
        for flag, folder, stage in (("--models", a.models, "train"), ("--vocab", a.vocab, "vocab")):
            if folder.exists() and not folder.is_dir():
                raise NotADirectoryError(f"{flag} {folder}: a file, not a folder (the {stage} "
                                         f"stage's; the default is {flag} "
                                         f"{_TEXT_DEFAULTS[flag]})")
    # the system before the input: a wrong --system is said at once, not after stdin's end
    translator = api.load(a.system, params=params_path, models_dir=a.models,
                          vocab_dir=a.vocab, device=a.device)
    sentences = _read_input(a.input)
    source = str(a.input or "<stdin>")
    if not a.long_lines:
        _check_line_lengths(sentences, source)
    beam = max(translator.beams) if a.beam is None else a.beam
    if a.nbest == 1:
        lines = translator.translate(sentences, beam=beam, batch_size=a.batch_size,
                                     source=source)
    else:  # tokenised, as the translate stage writes beam<K>.nbest and rescoring reads n-best lists
        out = translator.translate_tokenized(translator.preprocess(sentences), beam=beam,
                                             nbest=a.nbest, batch_size=a.batch_size,
                                             source=source)
        lines = [nbest_line(i, h, translator.feature, lp)
                 for i, hs in enumerate(out) for h, lp in hs]
    _write_output(a.output, lines)
    log.info("read %d sentences from %s; wrote %s with '%s' at beam %d in %.1fs",
             len(sentences), a.input or "<stdin>", a.output or "<stdout>", translator.name, beam,
             time.perf_counter() - t0)


def _cmd_score(a, params_path: Path):
    import json

    from s2s.evaluate import significance

    if a.samples < significance.MIN_SAMPLES:
        raise ValueError(f"--samples must be at least {significance.MIN_SAMPLES} (the 95% "
                         f"interval cuts 2.5% of the resamples off each end), got {a.samples}")
    if a.seed < 1:
        raise ValueError(f"--seed must be at least 1 (sacreBLEU reads 0 as no seed), got {a.seed}")
    for path in (a.hyp, a.system, a.ref):
        if path is not None and not path.exists():
            raise FileNotFoundError(_not_made(path, params_path))
    result = significance.score_files(a.hyp, a.ref, system=a.system, tokenized=a.tokenized,
                                      samples=a.samples, seed=a.seed)
    print(json.dumps(result.as_dict(), indent=2) if a.json else result.describe())


def _cmd_verify(a, _params):
    from s2s import verify

    try:
        status = verify.main(a.run, a.against, strict=a.strict)
    except verify.NotARun as e:
        log.error("%s", e)
        raise SystemExit(2) from None
    raise SystemExit(status)


def _cmd_exps(a, _params):
    from s2s import experiments

    if a.width < 40:
        raise ValueError(f"--width must be at least 40, got {a.width}")
    exps = experiments.experiments(experiments.dvc_exp_show(all_commits=a.all_commits))
    sys.stdout.write(experiments.render(exps, width=a.width))
    for line in experiments.damage(exps):  # also where a script reading stdout cannot miss it
        log.warning("%s", line)


def _cmd_plots(a, _params):
    from s2s.report import offline_plots

    args = a.dvc_args[1:] if a.dvc_args[:1] == ["--"] else a.dvc_args
    raise SystemExit(offline_plots.show(args))


def _not_made(path: Path, params_path: Path) -> str:
    """One line for a missing input: which stage writes it, when the project's params name one."""
    stage = None
    if params_path.is_file():
        from s2s import pipeline

        try:
            stage = pipeline.producer(load(params_path), path)
        except ConfigError:
            pass
    if stage is None:
        return f"{path}: no such file"
    return f"{path}: no such file yet: `dvc repro {stage}` writes it"


def _stage_inputs(args: argparse.Namespace, spec) -> list[tuple[str | None, Path, str]]:
    """What the stage `spec` declares it reads: (its flag, or None for a dependency no flag
    names; the path it reads in this run; the path dvc.yaml gives it)."""
    passed = dict(spec.paths)
    out: list[tuple[str | None, Path, str]] = []
    for arg in stages.module(args.command).ARGS:
        given, default = getattr(args, arg.dest, None), passed.get(arg.flag)
        if arg.writes or given is None or default is None:
            continue
        if any(d == default or d.startswith(f"{default}/") for d in spec.deps):  # read, not kept
            out.append((arg.flag, Path(given), default))
    flagged = [default for _, _, default in out]
    out += [(None, Path(d), d) for d in spec.deps
            if not any(d == f or d.startswith(f"{f}/") for f in flagged)]
    return out


def _input_not_there(e: OSError, args: argparse.Namespace, spec, params) -> str | None:
    """One line for a stage's input that is not there (FileNotFoundError) or lies under a file
    where a folder belongs (NotADirectoryError): the file, the flag it came from, and the stage
    that writes it (s2s.pipeline.producer). None where the file is none of the stage's declared
    inputs: that error is not the user's to fix, and is shown as it is."""
    from pathlib import PurePosixPath

    from s2s import pipeline

    if not isinstance(e.filename, (str, os.PathLike)):
        return None
    name = Path(e.filename)
    target = Path(os.path.abspath(name))
    for flag, given, default in _stage_inputs(args, spec):
        root = Path(os.path.abspath(given))
        if target != root and root not in target.parents:
            continue
        where = f"{name} (from {flag} {given})" if flag else str(name)
        if isinstance(e, NotADirectoryError):
            blocker = next((p for p in reversed([name, *name.parents]) if p.is_file()), given)
            stage = pipeline.producer(params, default)
            made = f": `dvc repro {stage}` writes the folder {default}" if stage else ""
            return f"{where}: {blocker} is a file, not a folder{made}"
        made_as = PurePosixPath(default, target.relative_to(root).as_posix())
        stage = pipeline.producer(params, made_as)
        if stage is None:
            return f"{where}: no such file"
        if Path(os.path.abspath(made_as)) == target:
            return f"{where}: no such file yet: `dvc repro {stage}` writes it"
        return f"{where}: no such file: `dvc repro {stage}` writes it as {made_as}"
    return None


def _require_project_params(params_path: Path, command: str, fix: str) -> None:
    """Refuse a parameter file other than the project's params.yaml for a command that writes or
    checks dvc.yaml: its stages name their params keys with no file and their commands pass no
    --params, so DVC runs them with params.yaml's values (or fails on a key params.yaml lacks),
    whatever file dvc.yaml was made from."""
    if Path(params_path).resolve() != Path(PARAMS_FILE).resolve():
        raise ConfigError(
            f"{params_path}: `s2s {command}` works on {PARAMS_FILE} only: dvc.yaml's stages "
            f"read {PARAMS_FILE} (their params and commands name no other file, so DVC would "
            f"run them with its values, not {params_path}'s); {fix}")


def _cmd_profile(a, params_path: Path):
    """Write profiles/<name>.yaml, resolved (its `extends` chain merged), as params.yaml; DVC then
    reruns what the change touches."""
    if a.name is None:
        current = load(params_path).profile if params_path.exists() else "none"
        print(profiles.describe(current, params_path))
        return
    src = profiles.path_of(a.name)
    load(src)  # never switch to a profile that does not validate
    _require_project_params(  # it writes dvc.yaml too
        params_path, "profile NAME", f"leave out --params: the profile becomes {PARAMS_FILE}")
    from s2s import pipeline
    from s2s.io import atomic_write_text

    with projectlock.for_stage():  # never under a run that reads them
        # fsynced and renamed: a full disk leaves the old params.yaml and no temporary, and
        # names the file
        atomic_write_text(params_path, profiles.profile_text(src))
        try:
            pipeline.write(load(params_path), DVC_YAML)
        except (ValueError, RuntimeError, KeyError, OSError) as e:
            # dvc.yaml is params.yaml's to derive: it is now stale, and `dvc repro` would run
            # the old stages with the new params
            raise RuntimeError(
                f"{params_path} is now profile '{a.name}' (from {src}), but {DVC_YAML} was not "
                f"regenerated ({e}): run `s2s dag write` once that is fixed") from e
    print(f"{params_path} is now profile '{a.name}' (from {src}), {DVC_YAML} regenerated; run "
          f"`dvc repro`, or `snakemake --profile workflow/profiles/local` (then `dvc commit -f`)")


def _cmd_dag(a, params_path: Path):
    """dvc.yaml from params.yaml: `write` regenerates it, `check` fails if it is stale; `show`
    prints the stages of any parameter file."""
    from s2s import pipeline
    from s2s.config import require_complete
    from s2s.stages.check import require_declared_keys, require_own_rescorer_names

    if a.action != "show":  # show only prints: any file
        _require_project_params(params_path, f"dag {a.action}",
                                f"copy {params_path} to {PARAMS_FILE}, or switch to a profile "
                                f"with `s2s profile NAME`")
    params = load(params_path)
    require_own_rescorer_names(params)  # else two stages of one name, or outputs evaluate skips
    if a.action == "show":
        print(pipeline.describe_markdown(params), end="")
        return
    require_complete(params_path)
    require_declared_keys(params)  # DVC reads them from the file: else a stage fails late
    if a.action == "write":
        with projectlock.for_stage():
            changed = pipeline.write(params, DVC_YAML)
        print(f"{DVC_YAML} {'regenerated' if changed else 'already up to date'} from {params_path}")
    elif pipeline.stale(params, DVC_YAML):
        raise ConfigError(f"{DVC_YAML} is not what {params_path} generates (a model, system or "
                          f"rescorer added or removed, or a stage module changed): run "
                          f"`s2s dag write`")
    else:
        print(f"{DVC_YAML} is up to date with {params_path}")


# --- paths default to dvc.yaml's -----------------------------------------------------------------
# A flag left out takes the path the stage's declaration (s2s.dag.Arg) gives dvc.yaml's command
# for the params named by --params, so nothing here repeats a path or reads dvc.yaml back.


def _path(text: str) -> Path:
    """A path argument: an empty one (``--out ""``, an unset shell variable) is refused here, where
    it would otherwise be the current folder."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path: name a file or a folder")
    return Path(text)


def _path_default_help(arg) -> str:
    shown = arg.path.replace("{item}", "<NAME>")
    return f"default: {shown}, as dvc.yaml passes it" + (
        " (none where it does not)" if arg.optional else "")


def _at_least(lo: int):
    """An argparse type: an integer >= lo, else one line naming the bound."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {value}")
        return value

    return parse


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default unless its help already says it (or it has none)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def fill_path_defaults(a: argparse.Namespace, stage, path_flags: dict[str, str],
                       optional: dict[str, str] | None = None) -> None:
    """Give every path flag left unset the path `stage` (its s2s.dag.Stage) passes; an
    ``optional`` flag its stage does not pass stays unset."""
    passed = dict(stage.paths)
    for flag, dest in {**path_flags, **(optional or {})}.items():
        if getattr(a, dest) is None and flag in passed:
            setattr(a, dest, Path(passed[flag]))
        elif getattr(a, dest) is None and flag not in (optional or {}):
            raise ValueError(f"{a.command}: {flag} not given and stage {stage.name} does not "
                             f"pass it: pass {flag}")


STAGE_PATHS: dict[str, dict[str, str]] = {}  # subcommand -> {flag: dest}, filled by build_parser
STAGE_OPTIONAL: dict[str, dict[str, str]] = {}  # the same for paths a stage can do without


def _check_params_env(params: Path) -> None:
    """Under `dvc repro` (DVC sets DVC_STAGE for a stage's command) a stage reads params.yaml,
    the file DVC hashes: a parameter file named by $S2S_PARAMS (the Snakemake workflow's, or one
    exported by hand) would make outputs DVC records under other values."""
    named = os.environ.get(PARAMS_ENV)
    if named and os.environ.get("DVC_STAGE") and params == Path(named) and (
            Path(named).resolve() != Path(PARAMS_FILE).resolve()):
        raise ValueError(f"${PARAMS_ENV} names {named}, but DVC runs this stage and tracks "
                         f"{PARAMS_FILE}: unset {PARAMS_ENV} (only the Snakemake workflow sets "
                         f"it, for its own jobs)")
    if named and params == Path(named):
        log.info("parameter file %s (from $%s)", named, PARAMS_ENV)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="s2s", description=" ".join(
        __doc__.split("\n\n")[0].split()), formatter_class=_Help)
    p.add_argument("--params", type=_path, default=None,
                   help=f"parameter file (default: {PARAMS_FILE}; for a stage, ${PARAMS_ENV} "
                        f"where set, as the Snakemake workflow sets it)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="debug logging, and tracebacks instead of one-line errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def stage(name, fn, help, args):
        sp = sub.add_parser(name, help=help, description=help,
                            formatter_class=_Help)
        sp.set_defaults(fn=fn)
        STAGE_PATHS[name], STAGE_OPTIONAL[name] = {}, {}
        for arg in args:
            sp.add_argument(arg.flag, type=_path, default=None, dest=arg.dest, metavar="PATH",
                            help=f"{arg.meaning}"
                                 f"{', optional' if arg.optional else ''}; "
                                 f"{_path_default_help(arg)}")
            (STAGE_OPTIONAL if arg.optional else STAGE_PATHS)[name][arg.flag] = arg.dest
        return sp

    for name in stages.STAGES:
        mod = stages.module(name)
        sp = stage(name, mod.cli, mod.HELP, mod.ARGS)
        item = getattr(mod, "ITEM", None)  # a stage run once per model, system or rescorer
        if item is not None:
            sp.add_argument(item.dest, help=item.help)
        if hasattr(mod, "add_arguments"):
            mod.add_arguments(sp)

    s = sub.add_parser(
        "translate-text", formatter_class=_Help,
        help="translate your own raw English sentences (stdin or a file) to French",
        description="Translate raw sentences, one per line, with a system of the params (from "
                    "the run's models/ and data/vocab/) or an export folder: normalised and "
                    "Moses-tokenised as `prepare` does, decoded, detokenised as the translate "
                    "stage does. Example: echo 'A man is riding a bicycle.' | "
                    "s2s translate-text --system ensemble5")
    s.set_defaults(fn=_cmd_translate_text)
    s.add_argument("--system", required=True,
                   help="a system of params `systems` (ensemble5) or an export folder "
                        "(exports/ensemble5)")
    s.add_argument("-i", "--input", type=_stdio_or_path, default=None,
                   help="raw sentences, one per line (LF line ends); - or none: stdin "
                        "(a file named - is ./-)")
    s.add_argument("-o", "--output", type=_stdio_or_path, default=None,
                   help="translations, one per line; - or none: stdout. A file is written "
                        "whole or not at all (a temporary renamed into place; a link's file, "
                        "the link kept); a FIFO, a device or >(...) is written straight")
    s.add_argument("--long-lines", action="store_true",
                   help="translate a line of more words than prepare allows in a test set "
                        "(else refused: a file that lost its line breaks)")
    s.add_argument("--beam", type=_at_least(1), default=None,
                   help="beam width (default: the system's widest beam in params or export)")
    s.add_argument("--nbest", type=_at_least(1), default=1,
                   help="hypotheses per sentence; above 1 the output is Moses n-best format "
                        "`id ||| translation ||| <kind>=logprob ||| logprob`: the translation "
                        "Moses-tokenised, not detokenised (the lines the translate stage writes "
                        "to beam<K>.nbest for the same system, beam and input, and what "
                        "rescoring reads), <kind> that of the system's models (lstm, gru, cho, "
                        "attention, transformer), best first as the search ranked them (under "
                        "bf16 a near-tie's fp32 scores can be out of order: "
                        "docs/precision-and-speed.md, \"N-best lists\")")
    s.add_argument("--batch-size", type=_at_least(1), default=None,
                   help="sentences per batch at beam 12 (default: translate.batch_size)")
    s.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="where to decode (default: translate.device)")
    s.add_argument("--models", type=_path, default=Path(_TEXT_DEFAULTS["--models"]),
                   help="folder of model dirs, for a system name")
    s.add_argument("--vocab", type=_path, default=Path(_TEXT_DEFAULTS["--vocab"]),
                   help="vocabulary folder, for a system name")

    s = sub.add_parser(
        "score", formatter_class=_Help,
        help="BLEU of a hypothesis file both ways; with a second file, paired bootstrap",
        description="Tokenised BLEU (the paper's: Moses tokenisation as in `prepare`, then "
                    "sacreBLEU --tokenize none) and sacreBLEU 13a of HYP against --ref; with "
                    "a second file, sacreBLEU's paired bootstrap resampling of SYSTEM against "
                    "HYP and the 95% interval of the tokenised-BLEU difference.")
    s.set_defaults(fn=_cmd_score)
    s.add_argument("hyp", type=_path, help="hypotheses, one per line (the baseline if two)")
    s.add_argument("system", type=_path, nargs="?", default=None,
                   help="a second system's hypotheses, compared with HYP")
    s.add_argument("-r", "--ref", type=_path, required=True, help="references, one per line")
    s.add_argument("--tokenized", action="store_true",
                   help="HYP, SYSTEM and --ref are Moses-tokenised already (e.g. beam12.tok.fr "
                        "and test.tok.fr); else they are raw text (beam12.detok.fr, test.raw.fr)")
    s.add_argument("--samples", type=int, default=1000,
                   help="bootstrap resamples (at least 40: the 95%% interval cuts 2.5%% of them "
                        "off each end)")
    s.add_argument("--seed", type=int, default=12345,
                   help="bootstrap seed, at least 1 (sacreBLEU's, which reads 0 as none)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")

    s = sub.add_parser(
        "exps", formatter_class=_Help,
        help="DVC experiments side by side: the params that differ, perplexity, BLEU, verdicts",
        description="Reads `dvc exp show --json` and prints one column per experiment (the "
                    "workspace, the commit, its experiments): the params whose values differ, "
                    "every model's test perplexity, every system's tokenised BLEU at its widest "
                    "beam, the rescoring outputs and the claims' verdicts. No dependency hashes.")
    s.set_defaults(fn=_cmd_exps)
    s.add_argument("--all-commits", action="store_true",
                   help="every commit's experiments, not only those of HEAD")
    s.add_argument("--width", type=int, default=160,
                   help="widest line; more experiments go into further blocks")

    s = sub.add_parser(
        "verify", formatter_class=_Help,
        help="does a rerun reproduce a published run? every number and claim, compared",
        description="Compares the numbers of RUN's metrics a rerun moves (training perplexities, "
                    "tokenised BLEU of every system and rescoring output) with the reference's: "
                    "identical, within the spread the reference's own seeds give (twice their "
                    "standard deviation), or different; then each claim's verdict. Exit status "
                    "0 when every claim of the reference has its verdict, 1 when not (with "
                    "--strict, also when a number of the reference is different or missing), 2 "
                    "when RUN or the reference is not a run, or they are not of one configuration "
                    "(another profile, or settings that differ but for where and how they ran).")
    s.set_defaults(fn=_cmd_verify)
    s.add_argument("--strict", action="store_true",
                   help="also fail (1) where a number of the reference is different in RUN or "
                        "missing from it (a gate for CI: a file lost, a number beyond the seeds' "
                        "spread)")
    s.add_argument("run", type=_path, help="a run: a folder with params.yaml and metrics/")
    s.add_argument("--against", type=_path, default=Path("reports/default"),
                   help="the reference run: the published run of the default profile "
                        "(reports/default, from the folder the command runs in)")

    s = sub.add_parser(
        "plots", formatter_class=_Help,
        help="dvc plots show, as a page that draws offline (vega inline, from vl-convert-python)",
        description="Runs `dvc plots show --html-template T ARGS...` with a template that "
                    "carries vega, vega-lite and vega-embed inline (DVC's own page loads them "
                    "from a CDN and stays blank offline). Any other flag of dvc plots show "
                    "passes through: s2s plots -o plots_dir, s2s plots dev_perplexity.")
    s.set_defaults(fn=_cmd_plots)
    s.add_argument("dvc_args", nargs=argparse.REMAINDER, help="arguments of dvc plots show")

    s = sub.add_parser("dag", help="show the pipeline, write dvc.yaml from params (write) or "
                                   "check it is current",
                       description="dvc.yaml is generated from the parameter file and the stage "
                                   "modules (src/s2s/stages): run `s2s dag write` after adding "
                                   "or removing a model, system or rescorer.")
    s.add_argument("action", choices=("show", "write", "check"),
                   help="show: one line per kind of stage, what it reads, writes and watches "
                        "(docs/pipeline.md); write: regenerate dvc.yaml; check: fail if it is "
                        "not what params give")
    s.set_defaults(fn=None)
    s = sub.add_parser("profile", help="show or switch the parameter profile",
                       description="Without NAME: the profile params.yaml holds, and whether "
                                   "it was edited since (`dvc exp run -S` edits it), and the "
                                   "profiles of profiles/. With NAME: write profiles/NAME.yaml, "
                                   "resolved (its `extends` chain merged), as params.yaml and "
                                   "regenerate dvc.yaml; `dvc repro` then "
                                   "reruns what the change touches.")
    s.add_argument("name", nargs="?", help="a profile of profiles/ (default: show them)")
    s.set_defaults(fn=None)
    for sp in sub.choices.values():  # -v and --params after the subcommand too
        sp.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="debug logging, and tracebacks instead of one-line errors")
        sp.add_argument("--params", type=_path, default=argparse.SUPPRESS,
                        help="parameter file (as before the command: `s2s --params FILE ...`)")
    return p


def stage_of(args: argparse.Namespace, params):
    """The stage (s2s.dag.Stage) this command runs: that of the model, system or rescorer it
    names, from the stage module's declaration for `params`."""
    mod = stages.module(args.command)
    specs = mod.stages(params)
    item = getattr(mod, "ITEM", None)
    if item is not None:
        named = getattr(args, item.dest)
        known = [s.item for s in specs]
        specs = [s for s in specs if s.item == named]
        if not specs:
            raise ConfigError(f"{params.source}: no {item.what} '{named}' under '{item.section}' "
                              f"(known: {', '.join(known)})")
    if len(specs) != 1:
        raise ConfigError(f"{params.source}: params give no `{args.command}` stage")
    return specs[0]


# The commands that are no stage: they print their answer (a pipe's reader may leave early).
PRINTING = ("score", "translate-text", "exps", "verify", "plots")
NO_STAGE = ("profile", "dag", *PRINTING)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plots"] and not {"-h", "--help"} & set(argv[1:]):
        # every argument is dvc plots show's (argparse would take its flags for ours)
        argv = ["plots", "--", *argv[1:]]
    args = build_parser().parse_args(argv)
    if args.params is None:
        is_stage = args.command not in NO_STAGE
        args.params = Path((os.environ.get(PARAMS_ENV) if is_stage else None) or PARAMS_FILE)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    try:
        if args.command in ("profile", "dag"):
            (_cmd_profile if args.command == "profile" else _cmd_dag)(args, args.params)
            return 0
        if args.command in PRINTING:  # no stage
            args.fn(args, args.params)
            return 0
        _check_params_env(args.params)
        params = load(args.params)  # the whole file is validated before any stage works
        spec = stage_of(args, params)  # an unknown model or system named first
        fill_path_defaults(args, spec, STAGE_PATHS[args.command], STAGE_OPTIONAL[args.command])
        # One writer per project: a stage run by hand holds the project lock (s2s.projectlock);
        # under `dvc repro` or inside a Snakemake run the engine holds it.
        with projectlock.for_stage():
            # the stage sees only the params keys its dvc.yaml entry declares
            try:
                args.fn(args, only(params, spec.params, stage=spec.name))
            except (FileNotFoundError, NotADirectoryError) as e:
                said = _input_not_there(e, args, spec, params)
                if said is None:  # not one of the stage's inputs: a bug's, shown as it is
                    raise
                raise type(e)(said) from e
    except KeyboardInterrupt:
        log.error("interrupted")
        return 130
    except BrokenPipeError as e:
        if args.command not in NO_STAGE:  # a stage's: an error like any other
            if args.verbose:
                raise
            log.error("%s: %s (run with -v for the traceback)", type(e).__name__, e)
            return 1
        # the reader of what the command prints went away (`s2s score ... | head`): nothing to
        # say; Python would report the failed flush of stdout at exit, so point it at nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a process a closed pipe stopped
    except Stopped as e:  # a signal, after a final checkpoint: one line, status 128 + N
        log.error("%s", e)
        return e.exit_status
    except (ValueError, RuntimeError, KeyError, OSError, OverflowError) as e:
        # Bad input, bad params, a bad checkpoint, a number too large for numpy or torch: one
        # clear line; the traceback with -v.
        if args.verbose:
            raise
        # a KeyError's str() is its message quoted; every other error's is the message
        said = e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 else e
        log.error("%s: %s (run with -v for the traceback)", type(e).__name__, said)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
