"""The memory a beam search step holds, in (hypotheses x target words) fp32 copies, for a system of
one model and for ensembles: what the translate stage's check (s2s.decode.translate.step_copies)
counts before a model loads, to refuse a search that would not fit.

    python bench/search_memory.py                        # 1, 2 and 5 models, V 50,000, beam 12
    python bench/search_memory.py --members 1,2 --vocab 5000 --sentences 20   # a check that it runs

Each system decodes in a process of its own: small LSTMs (1 x 32 cells, so that the weights and
the encoder weigh nothing beside the scores), `--sentences` sources of 5 words at `--beam`, 3
steps. A row's "copies" is that process's peak RSS (wait4) over a process that built the same
models and decoded nothing, in units of one (sentences x beam, V) fp32 tensor; "counted" is
step_copies(members), what the check assumes. The check is sound where counted >= copies - 0.2
(the measure's own noise: the allocator's pages), with copies of 64 MiB or more (smaller ones are
lost beside what any search allocates besides its scores). The CPU kind and the load average are
printed first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from scale import machine  # noqa: E402  (bench/scale.py; nothing here imports torch: a child's
# peak RSS would count the pages it shares with this process between fork and exec)

ROOT = Path(__file__).resolve().parents[1]
# Below this a copy is lost beside what any search allocates besides its scores (the encoder's
# tensors, the search's own bookkeeping, the allocator's arenas): tens of MiB.
SMALLEST_COPY_KIB = 64 << 10

SEARCH = """
import sys, torch
from s2s.decode.beam import beam_search
from s2s.decode.ensemble import Ensemble
from s2s.model import build_model
from s2s.model.seq2seq import RNNConfig
torch.set_num_threads(1)
members, vocab, sentences, beam, search = (int(x) for x in sys.argv[1:6])
models = []
for k in range(members):
    m = build_model(RNNConfig(cell="lstm", num_layers=1, hidden_size=32, embed_size=16,
                              reverse_source=True, init_seed=k), src_vocab=100, tgt_vocab=vocab,
                    pad=0)
    m.init_weights(k)
    models.append(m.eval())
model = models[0] if members == 1 else Ensemble(models, combine="mean_prob")
src = torch.randint(3, 100, (sentences, 5), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    if search:
        beam_search(model, src, torch.full((sentences,), 5), beam=beam, bos=1, eos=2, pad=0,
                    max_len=3)
"""


def peak_kib(members: int, vocab: int, sentences: int, beam: int, search: bool) -> int:
    """The peak RSS (KiB) of a process that builds the system and, with `search`, decodes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SEARCH, str(members), str(vocab),
                             str(sentences), str(beam), str(int(search))], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the search of {members} model(s) failed (exit status "
                         f"{os.waitstatus_to_exitcode(status)})")
    return usage.ru_maxrss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", default="1,2,5", help="models of each system (comma list)")
    ap.add_argument("--vocab", type=int, default=50_000, help="target words")
    ap.add_argument("--sentences", type=int, default=170, help="sources searched at once")
    ap.add_argument("--beam", type=int, default=12)
    args = ap.parse_args()
    print(machine())
    copy_kib = args.sentences * args.beam * args.vocab * 4 / 1024
    print(f"one copy: {args.sentences} sentences x beam {args.beam} x {args.vocab:,} words x 4 "
          f"bytes = {copy_kib / 1024:.1f} MiB")
    sizes = [int(x) for x in args.members.split(",")]
    copies = [(peak_kib(k, args.vocab, args.sentences, args.beam, True)
               - peak_kib(k, args.vocab, args.sentences, args.beam, False)) / copy_kib
              for k in sizes]
    sys.path.insert(0, str(ROOT / "src"))
    from s2s.decode.translate import step_copies  # torch: only once every child has run

    print(f"{'models':>6} | {'copies':>6} | {'counted':>7} | check")
    for k, held in zip(sizes, copies):
        counted = step_copies(k)
        check = ("copies too small to tell" if copy_kib < SMALLEST_COPY_KIB else
                 "sound" if counted >= held - 0.2 else "UNDERCOUNTS")
        print(f"{k:>6} | {held:>6.2f} | {counted:>7} | {check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
