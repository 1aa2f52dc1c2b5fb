"""Rescoring throughput: hypotheses/s of `s2s.decode.rescore.lstm_scores` on a real n-best list.

Compares, in one run and interleaved (rounds alternate the variants), plain teacher forcing of
every hypothesis with its own copy of the source (`score_sequences` on batches sorted by length:
how rescoring ran before) against `lstm_scores`, which scores each sentence's list as a prefix
tree (its source encoded once, each distinct prefix stepped once), at several batch sizes, and
checks that they give the same scores. Prints a table; asserts nothing but that agreement.

    .venv/bin/python bench/rescore.py --run /work/defrun --members reversed_1 --sentences 100
    .venv/bin/python bench/rescore.py --run /work/defrun --members reversed_1,reversed_2,reversed_3,reversed_4,reversed_5

`--run` is a pipeline directory after `dvc repro` (its params.yaml, data/, models/ and
outputs/translate/<rescore.baseline>/beam<K>.nbest).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_line, quiet_progress, set_threads, table  # noqa: E402

from s2s.config import load as load_params  # noqa: E402
from s2s.data.batching import collate  # noqa: E402
from s2s.data.vocab import Vocab  # noqa: E402
from s2s.decode import rescore  # noqa: E402
from s2s.decode.beam import score_sequences  # noqa: E402
from s2s.decode.translate import load_members  # noqa: E402


@torch.no_grad()
def teacher_forced(model, cands, sources, *, vocab, src_pad, batch_size, device):
    """Every hypothesis teacher-forced on its own copy of its source, batched by length: the
    reference (how the rescore stage scored before the prefix tree)."""
    order = sorted(range(len(cands)), key=lambda i: (len(sources[cands[i].sentence]),
                                                     len(cands[i].text.split()), i))
    scores = [0.0] * len(cands)
    for k in range(0, len(order), batch_size):
        idx = order[k: k + batch_size]
        pairs = [(sources[cands[i].sentence], vocab.encode(cands[i].text)) for i in idx]
        b = collate(pairs, pad=src_pad, bos=vocab.bos, eos=vocab.eos)
        out = score_sequences(model, b.src.to(device), b.src_lengths.to(device),
                              b.tgt_in[:, 1:].to(device),
                              torch.tensor([len(t) for _, t in pairs]).to(device),
                              bos=vocab.bos, eos=vocab.eos)
        for i, s in zip(idx, out.tolist()):
            scores[i] = s
    return scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="pipeline directory after dvc repro")
    ap.add_argument("--members", default="reversed_1", help="models of the rescorer, comma-separated")
    ap.add_argument("--sentences", type=int, default=100, help="first N test sentences' lists")
    ap.add_argument("--batch-sizes", default="64,256", help="hypotheses per batch")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    members = a.members.split(",")
    if len(set(members)) != len(members):  # as params refuse a system's repeated member
        ap.error(f"--members names a model twice: {a.members}")
    threads = set_threads(a.threads)
    params = load_params(a.run / "params.yaml")
    src_vocab = Vocab.load(a.run / "data/vocab/en.tsv")
    tgt_vocab = Vocab.load(a.run / "data/vocab/fr.tsv")
    test = (a.run / "data/prepared/test.tok.en").read_text(encoding="utf-8").splitlines()
    path = rescore.nbest_path(params, translate_dir=a.run / "outputs/translate",
                              raw_dir=a.run / "data/raw")
    lists = rescore.read_nbest(path, sentences=len(test))[: a.sentences]
    cands = [c for lst in lists for c in lst]
    sources = [src_vocab.encode(s) for s in test[: a.sentences]]
    device = torch.device("cpu")
    model = load_members(params.model_configs(members), models_dir=a.run / "models",
                         src_vocab=src_vocab, tgt_vocab=tgt_vocab, device=device,
                         combine=params.translate.combine)
    print(machine_line(threads))
    print(f"{path}: {len(cands):,} hypotheses of {len(lists)} sentences; rescorer "
          f"{', '.join(members)}; fp32, as the rescore stage scores")

    def run(how, bs):
        if how == "teacher forcing":
            return teacher_forced(model, cands, sources, vocab=tgt_vocab, src_pad=src_vocab.pad,
                                  batch_size=bs, device=device)
        return rescore.lstm_scores(model, cands, sources, vocab=tgt_vocab, src_pad=src_vocab.pad,
                                   batch_size=bs, device=device, desc=how)

    variants = [(f"{how}, batch {bs}", how, bs) for bs in map(int, a.batch_sizes.split(","))
                for how in ("teacher forcing", "prefix tree")]
    seconds = {v[0]: [] for v in variants}
    scores = {}
    rescore.progress = quiet_progress  # no bars inside the timing
    for _ in range(a.rounds):
        for name, how, bs in variants:
            t0 = time.perf_counter()
            scores[name] = run(how, bs)
            seconds[name].append(time.perf_counter() - t0)
    ref = scores[variants[0][0]]
    rows = []
    for name, *_ in variants:
        best = min(seconds[name])
        err = max(abs(x - y) for x, y in zip(scores[name], ref))
        rows.append([name, f"{best:.2f}", f"{len(cands) / best:,.0f}",
                     f"{min(seconds[variants[0][0]]) / best:.2f}x", f"{err:.1e}"])
        assert err < 1e-3, f"{name}: scores differ from the reference by {err}"
    print(table(["variant", "seconds (best of rounds)", "hyp/s", "speed-up", "max |score diff|"],
                rows))


if __name__ == "__main__":
    main()
