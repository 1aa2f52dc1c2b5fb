"""What several test files share: the tiny vocabulary's special ids, the golden values' four
pairs, one summed NLL, two training steps done by the trainer's own ``train_step``; the scripted
model of the search tests and exhaustive search; the tiny smoke params, a process started in
its own session; the analyses' tiny project; a command's one-line error.

(Fixtures stay in conftest.py; these are plain functions, imported as ``from helpers import``.)
"""

from __future__ import annotations

import errno
import io
import math
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from torch import Tensor

from conftest import BIN, MIRROR
from s2s import checkpoint, precision
from s2s.config import TrainConfig
from s2s.data.vocab import Vocab
from s2s.model import build_model
from s2s.model.seq2seq import RNNConfig
from s2s.train import shard_loss, train_step

CPU = torch.device("cpu")
ROOT = Path(__file__).resolve().parents[1]


def profile_dict(name: str) -> dict:
    """profiles/<name>.yaml resolved (a profile may be the differences from another): the
    complete mapping, as `s2s profile NAME` writes it to params.yaml."""
    from s2s.config import resolved

    return resolved(ROOT / "profiles" / f"{name}.yaml")


def profile_text(name: str) -> str:
    """The complete params.yaml text `s2s profile NAME` writes."""
    from s2s.profiles import profile_text as text

    return text(ROOT / "profiles" / f"{name}.yaml")


class Specials:  # the vocabulary attributes collate, the losses and translate use
    pad, bos, eos = 0, 1, 2


def tiny_pairs():
    """The four (source, target) id pairs the golden values of tests/test_golden.py were
    computed on (sources over ids 3..29, targets over 3..30)."""
    g = torch.Generator().manual_seed(5)
    return [([int(x) for x in torch.randint(3, 30, (n,), generator=g)],
             [int(x) for x in torch.randint(3, 31, (m,), generator=g)])
            for n, m in [(5, 6), (3, 2), (7, 8), (1, 3)]]


def shard_nll(model, pairs, *, vocab=Specials, device=CPU, autocast=None):
    """The summed NLL of `pairs` and their target tokens, as the trainer computes them
    (``s2s.train.shard_loss`` without label smoothing); `autocast` defaults to fp32."""
    _, nll, ntok = shard_loss(model, pairs, vocab=vocab, device=device,
                              autocast=autocast or precision.autocast(device, None))
    return nll, ntok


def two_training_steps(model, mm_dtype=None, pairs=None) -> list[float]:
    """Two updates of `model` on `pairs` (default: tiny_pairs) by ``s2s.train.train_step``, the
    trainer's own step (the paper's SGD at lr 0.7, the gradient norm clipped at 5), in fp32 or
    with bf16 products (`mm_dtype`): the two mean losses per sentence."""
    model.train()
    pairs = tiny_pairs() if pairs is None else pairs
    opt = torch.optim.SGD(model.parameters(), lr=0.7)
    losses = []
    for _ in range(2):
        nll, _ = train_step(model, opt, pairs, batch_size=len(pairs), lr=0.7, cfg=TrainConfig(),
                            vocab=Specials, device=CPU,
                            autocast=precision.autocast(CPU, mm_dtype))
        losses.append(nll / len(pairs))
    return losses


def analysis_markdown(analysis_dir, figures_dir, *, rel_dir: str = "figures") -> str:
    """The analyses' report sections alone, as Markdown (## headings), without the document's
    own title: what the report writes for them."""
    from s2s.analysis.outputs import read as read_analysis
    from s2s.report.render import Document, to_markdown
    from s2s.report.sections.analysis.every import render

    doc = Document("Analyses", render(read_analysis(analysis_dir), figures_dir, rel_dir=rel_dir))
    return to_markdown(doc, contents=False).split("\n", 2)[2]


# --- search: a model whose steps are scripted, and exhaustive search (tests/test_beam.py) ---

PAD, BOS, EOS, A, B, C = range(6)
V = 6

# A script maps what the decoder has produced so far (a tuple of tokens, <BOS> excluded) or, as a
# fallback, the step index (an int: the number of tokens so far) to {token: probability}.
# Anything not scripted ends the sentence: <EOS> with probability 1.
Script = Mapping[object, Mapping[int, float]]
CERTAIN_EOS = {EOS: 1.0}


@dataclass(frozen=True)
class ScriptedState:
    script: Tensor  # (N,) which script each row follows
    fed: tuple[tuple[int, ...], ...]  # per row, the decoder inputs so far (<BOS> first)

    def select(self, index: Tensor) -> ScriptedState:
        return ScriptedState(self.script[index], tuple(self.fed[i] for i in index.tolist()))


class ScriptedModel:
    """The inference contract over scripts; sentence i of ``src`` follows script ``src[i, 0]``.

    ``rows_per_step`` records the batch size of every step call (test instrumentation only).
    """

    def __init__(self, *scripts: Script) -> None:
        self.scripts = scripts
        self.rows_per_step: list[int] = []

    def encode(self, src: Tensor, lengths: Tensor) -> ScriptedState:
        return ScriptedState(src[:, 0].clone(), tuple(() for _ in range(src.size(0))))

    def step(self, prev_tokens: Tensor, state: ScriptedState) -> tuple[Tensor, ScriptedState]:
        self.rows_per_step.append(prev_tokens.numel())
        fed = tuple(f + (p,) for f, p in zip(state.fed, prev_tokens.tolist()))
        probs = [self._probs(self.scripts[s], f[1:]) for s, f in zip(state.script.tolist(), fed)]
        return torch.tensor(probs, dtype=torch.float64).log(), ScriptedState(state.script, fed)

    @staticmethod
    def _probs(script: Script, prefix: tuple[int, ...]) -> list[float]:
        table = script.get(prefix, script.get(len(prefix), CERTAIN_EOS))
        assert math.isclose(sum(table.values()), 1.0), f"script row {prefix} does not sum to 1"
        return [table.get(w, 0.0) for w in range(V)]


def exhaustive(model, src: Tensor, length: Tensor, *, max_len: int, vocab: int = V,
               bos: int = BOS, eos: int = EOS, pad: int = PAD):
    """Every sequence of up to max_len steps (ending in <EOS>, or cut at max_len), best first,
    over the `vocab` target words but <pad> and <bos>, which the search never predicts
    (tests/test_transformer.py passes its own ids)."""
    out = []

    def walk(prefix: tuple[int, ...], state, score: float) -> None:
        lprobs, state = model.step(torch.tensor([prefix[-1] if prefix else bos]), state)
        for w in range(vocab):
            if w in (pad, bos):
                continue
            s = score + lprobs[0, w].item()
            if w == eos:
                out.append((s, prefix, True))
            elif len(prefix) + 1 == max_len:
                out.append((s, prefix + (w,), False))
            else:
                walk(prefix + (w,), state, s)

    with torch.no_grad():
        walk((), model.encode(src.unsqueeze(0), length.unsqueeze(0)), 0.0)
    return sorted(out, key=lambda x: -x[0])


# --- the tiny smoke params and processes (tests/test_faults.py, tests/test_lifecycle.py) ---


def tiny_params_dict() -> dict:
    """profiles/smoke.yaml with a 1x16 model, half an epoch (48 steps), one thread, a checkpoint
    every 4 steps, and a forward system decoded at beams 1 and 12."""
    raw = profile_dict("smoke")
    raw["model"].update(num_layers=1, hidden_size=16, embed_size=16)
    raw["train"].update(device="cpu", threads=1, epochs=0.5, eval_every=0.25,
                        checkpoint_every=4, log_every=8)
    raw["translate"].update(device="cpu", threads=1)
    raw["systems"]["forward"] = {"members": ["forward"], "beams": [1, 12], "nbest": 2}
    return raw


def write_params(path: Path, raw: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def start(cmd: list[str], cwd: Path, log: Path, env: dict | None = None) -> subprocess.Popen:
    """A process in its own session, so that it and its children can be killed as a group."""
    full_env = {**os.environ, "S2S_MIRROR": str(MIRROR),
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


# --- the analyses' tiny project (tests/test_analysis.py, tests/test_reproducible.py) ---


def write_vocab(path, words):
    path.write_text("".join(f"{w}\t0\n" for w in ("<pad>", "<unk>", "<bos>", "<eos>", *words)))
    return Vocab.load(path)


def tiny_analysis_project(tmp_path, configs: dict[str, RNNConfig]):
    """Tiny test data, vocabularies and one checkpoint per config: (prepared, vocab, models)."""
    prepared, vocab_dir, models_dir = tmp_path / "prepared", tmp_path / "vocab", tmp_path / "models"
    for d in (prepared, vocab_dir):
        d.mkdir()
    en = ["A", "man", "woman", "is", "watching", "a", "dog", ".", ","]
    fr = ["Un", "homme", "femme", "regarde", "une", "chien", "."]
    src_vocab = write_vocab(vocab_dir / "en.tsv", en)
    tgt_vocab = write_vocab(vocab_dir / "fr.tsv", fr)
    (prepared / "test.tok.en").write_text(
        "A man is watching a woman .\nA dog , a man .\nA woman\nA dog is watching a man .\n")
    (prepared / "test.tok.fr").write_text(
        "Un homme regarde une femme .\nUn chien .\nUne femme\nUn chien regarde un homme .\n")
    for seed, (name, cfg) in enumerate(configs.items()):
        m = build_model(cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), pad=0)
        m.init_weights(seed)
        checkpoint.save(models_dir / name / "model.pt", m, src_vocab=src_vocab,
                        tgt_vocab=tgt_vocab)
    return prepared, vocab_dir, models_dir


def one_line_error(proc: subprocess.CompletedProcess, *needles: str, status: int) -> str:
    """The one line a command that refused its input printed (no traceback), holding every
    needle, with exit status `status`."""
    assert proc.returncode == status, (proc.returncode, proc.stdout[-1000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def ids_of(prepared: Path, vocab: Path, where: Path) -> Path:
    """The ids stage's folder of `prepared` and `vocab`, made anew in `where`/ids."""
    from s2s.layout import IdsPaths
    from s2s.stages import ids as ids_stage

    out = Path(where) / "ids"
    ids_stage.main(IdsPaths(prepared=prepared, vocab=vocab, out=out))
    return out


def untrained_forward(params, root: Path, *, words: tuple[str, ...],
                      record_text: bool) -> tuple[Path, Path]:
    """`params`' model `forward`, untrained, saved as the trainer saves it under
    `root`/models/forward/model.pt (with its text record, or as earlier versions did, without),
    over vocabularies of the specials and `words` in `root`/vocab: (models dir, vocab dir)."""
    from s2s import checkpoint
    from s2s.data.vocab import SPECIALS, Vocab
    from s2s.model import build_model
    from s2s.text_settings import text_record

    vocab_dir = Path(root) / "vocab"
    vocab_dir.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "fr"):
        (vocab_dir / f"{lang}.tsv").write_text(
            "".join(f"{w}\t{9 - i}\n" for i, w in enumerate((*SPECIALS, *words))))
    src, tgt = (Vocab.load(vocab_dir / f"{lang}.tsv") for lang in ("en", "fr"))
    model = build_model(params.model_config("forward"), src_vocab=len(src), tgt_vocab=len(tgt),
                        pad=src.pad)
    text = {"text": text_record(params.prepare)} if record_text else {}
    checkpoint.save(Path(root) / "models" / "forward" / "model.pt", model, src_vocab=src,
                    tgt_vocab=tgt, name="forward", **text)
    return Path(root) / "models", vocab_dir


def report_args(run: Path, out: Path) -> list[str]:
    """`s2s report` on a published run's layout under `run` (reports/default's), as
    reports/default/README.md gives it, writing to `out`."""
    return [str(a) for a in (
        "--params", run / "params.yaml", "report", "--metrics", run / "metrics",
        "--translate", run / "outputs" / "translate", "--groups", run / "metrics" / "figure3.csv",
        "--manifest", run / "data" / "raw" / "manifest.json",
        "--attention", run / "analysis" / "attention_weights.json",
        "--analysis", run / "analysis", "--prepared", run / "data" / "prepared",
        "--cost", run / "timing" / "cost.json",
        "--claims", run / "outputs" / "claims" / "claims.json", "--out", out)]


class FullFile(io.FileIO):
    """A file on a disk with `room` bytes left (shared by every file): the write past it fails
    with ENOSPC, which names no file, as a full disk's does."""

    room = 0

    def write(self, b):
        if len(b) > type(self).room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        type(self).room -= len(b)
        return super().write(b)
