"""Every script in bench/ starts (its imports and arguments work: a renamed library function fails
here, not on the machine that runs the benchmark), and bench/gpu.py, whose machine is rare, runs
its whole measurement on the CPU at a toy size and stops in one line where CUDA is asked for and
absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def bench(*args: str, timeout: float = 300, env: dict | None = None
          ) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")
                                          if p.name != "common.py"))
def test_every_bench_script_starts(script):
    proc = bench(str(BENCH / script), "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout


def test_the_line_reading_benchmark_reads_each_file_whole():
    """1 MiB of 50-byte sentences is 20,972 lines (the last cut short); the other files one line
    each (refused by the 64 MiB cap past it: the benchmark raises the cap)."""
    proc = bench("bench/lines.py", "--sizes", "1", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in proc.stdout.splitlines()
            if line.startswith(("| sentences", "| one line"))]
    assert [r[:3] for r in rows] == [["sentences", "1", "20,972"], ["one line, no LF", "1", "1"],
                                     ["one line, then LF", "1", "1"]], proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: the benchmark would run")
@pytest.mark.parametrize("command", [["bench/gpu.py"], ["bench/gpu.sh"], ["bench/gpu_check.sh"]])
def test_the_gpu_benchmark_without_cuda_stops_in_one_line(command):
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src")}
    args = [sys.executable, *command] if command[0].endswith(".py") else command
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    script = "bench/gpu.py" if command[0] == "bench/gpu.sh" else command[0]  # gpu.sh runs it
    assert f"{script}: no CUDA device" in proc.stderr


def test_the_gpu_checks_dag_runner_and_twin_run_on_the_cpu(tmp_path, mirror):
    """bench/gpu_check.sh's parts that do not need CUDA, on the CPU: the data stages of the
    default profile (to the ids) through bench/gpu_dag.py, a few steps of reversed_1 by
    bench/gpu_twin.py, and its comparison with itself."""
    env_mirror = {"S2S_MIRROR": str(mirror)}
    proc = bench("bench/gpu_dag.py", str(tmp_path / "p"), "--profile", "default", "--device",
                 "cpu", "--only", "ids", "--jobs", "2", env=env_mirror)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "5 stages ok, 0 failed" in proc.stdout
    assert (tmp_path / "p" / "data" / "ids" / "ids.json").exists()
    out = tmp_path / "cpu.csv"
    proc = bench("bench/gpu_twin.py", "train", str(tmp_path / "p"), "--steps", "3",
                 "--device", "cpu", "--out", str(out), env=env_mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = out.read_text().splitlines()
    assert rows[0] == "step,loss,device,precision,engine" and len(rows) == 4
    first = float(rows[1].split(",")[1])
    assert 8.0 < first < 9.5  # ~ln(6503): an untrained model's loss on the default's vocabulary
    proc = bench("bench/gpu_twin.py", "compare", str(out), str(out))
    assert proc.returncode == 0 and "+0.00%" in proc.stdout


def test_the_gpu_benchmark_measures_the_trainers_step_on_the_cpu_at_a_toy_size(tmp_path):
    out = tmp_path / "rows.json"
    proc = bench("bench/gpu.py", "--device", "cpu", "--size", "tiny", "--batch", "8",
                 "--steps", "2", "--warmup", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [(r["cell"], r["precision"]) for r in rows] == [
        ("lstm", "fp32"), ("peephole", "fp32"), ("lstm", "bf16"), ("peephole", "bf16")]
    for r in rows:
        assert r["steps"] == 2 and r["words"] > 0 and r["words_per_sec"] > 0
        # nn.LSTM compiles nothing; the peephole step is eager off CUDA, and the row says so
        assert r["compiled"] is (None if r["cell"] == "lstm" else False)
        # 3 x the forward matmul FLOPs per target word of a 1 x 16 model, vocab 200
        assert 3 * 2 * 16 * 200 < r["flops_per_word"] < 3 * (2 * 16 * 200 + 4 * 2 * 4 * 16 * 32)
    assert "tgt words/s" in proc.stdout and "a check of the script" in proc.stdout
    header = next(line for line in proc.stdout.splitlines() if line.startswith("cell "))
    assert "warm-up s  compiled  bf16 target" in header
    # the first step is checked and profiled, untimed: with no warm-up it was counted as timed
    # and each timed step was given the next one's batch
    proc = bench("bench/gpu.py", "--device", "cpu", "--size", "tiny", "--warmup", "0")
    assert proc.returncode == 2 and "--warmup and --steps must be at least 1" in proc.stderr


@pytest.mark.parametrize("compiles", [True, False], ids=["compiled", "compile-fails"])
def test_a_gpu_row_says_whether_the_peephole_step_ran_compiled(monkeypatch, compiles):
    """bench/gpu.py's `compiled` column: a torch.compile that fails falls back to eager with a
    log line only; the row must then say eager, not compiled. A stand-in for the compiled step
    (the eager step itself, or one that raises as a failed compile does) on the CPU."""
    monkeypatch.syspath_prepend(str(BENCH))
    import gpu
    from s2s.model import lstm

    def broken(*args):
        raise RuntimeError("Failed to find C compiler")

    monkeypatch.setattr(lstm, "_COMPILED", {"cpu": lstm._masked_step if compiles else broken})
    monkeypatch.setattr(lstm, "_COMPILED_RAN", set())
    torch.manual_seed(0)
    stack = lstm.PeepholeLSTM(4, 8, 2)
    stack.compiled, stack.schedule = True, "layers"
    x = torch.randn(3, 5, 4, requires_grad=True)
    for _ in range(2):  # the second batch: after a failure the stack is eager and calls nothing
        with gpu.compiled_calls() as calls:
            out, _ = stack(x)
            out.sum().backward()
        assert gpu.ran_compiled(calls) is compiles
        assert calls["compiled"] == (10 if compiles else 0)  # 2 layers x 5 steps
    assert (lstm._COMPILED["cpu"] is None) is not compiles


def test_decode_benchmarks_fp32_rows_run_under_the_fp32_plan_after_a_warm_up(monkeypatch):
    """bench/decode.py printed the bf16 plan through precision.choose, which applies it: on CUDA
    TF32 went on and its "fp32" rows ran TF32. Each translate() call must run under the plan of
    its row's precision (the plan applied last; on the CPU applying is a no-op, so it is
    recorded), and each precision's first call be an untimed warm-up on a few sentences."""
    decode, calls = _decode_spied(monkeypatch)
    decode.main(["--quick", "-n", "10", "--single", "--no-reference", "--threads", "1"])
    assert [c[0] for c in calls] == ["fp32"] * 4 + ["bf16"] * 4 + ["fp32"], calls
    assert [c[1] for c in calls] == [None] * 4 + [torch.bfloat16] * 4 + [None]
    # a warm-up on 8 sentences, then beams 1, 2, 12 on all 10, per precision; the drift check
    assert [c[2] for c in calls] == [8, 10, 10, 10] * 2 + [10]


def test_train_benchmarks_rows_each_step_under_their_own_precisions_plan(monkeypatch):
    """bench/train.py --device cuda set no TF32 flags, so torch's defaults ran its "fp32"
    nn.LSTM rows through cuDNN in TF32. Every step of a row, ours or the reference's, must run
    under its precision's plan (the rows are interleaved: the plan applied last; on the CPU
    applying is a no-op, so it is recorded)."""
    from s2s import precision

    monkeypatch.syspath_prepend(str(BENCH))
    import common
    import train as bench_train

    applied = []
    monkeypatch.setattr(precision.Precision, "apply",
                        lambda self: applied.append((self.name, self.tf32)))
    corpus = common.load_corpus(None)
    size = bench_train.Size("tiny", 1, 8, 8, len(corpus.src_vocab), len(corpus.tgt_vocab))
    idx = bench_train.batch_plan(corpus, 4, 1)[0]
    # (the reference's bf16 nn.LSTM needs a CPU with a bf16 engine: oneDNN has no other)
    runners = {(impl, prec): bench_train.make_runner(
        bench_train.Row(size, impl, "lstm", 4, prec), corpus, torch.device("cpu"))
        for impl, prec in (("ours", "fp32"), ("ours", "bf16"), ("reference", "fp32"))}
    for (impl, prec), runner in [*runners.items(), *runners.items()]:  # interleaved
        before = len(applied)
        runner(idx)
        assert applied[before:] == [(prec, False)], (impl, prec, applied)


def test_train_benchmarks_peak_line_names_the_product_it_measured(monkeypatch):
    """Without a bf16 engine the bf16 peak is a 512^3 product's, 2 runs (emulated bf16 takes
    minutes at 2048); the peak line said 2048^3, best of 16, whatever was measured."""
    from s2s import precision

    monkeypatch.syspath_prepend(str(BENCH))
    import common
    import train as bench_train

    calls = []
    monkeypatch.setattr(common, "peak_gemm_flops", lambda device, *, dtype, n, reps: (
        calls.append((dtype, n, reps)) or (1e9, 1e9)))
    cpu = torch.device("cpu")
    for engine, bf16 in ((None, (512, 2)), ("AMX", (2048, 8))):
        monkeypatch.setattr(precision, "bf16_engine", lambda device, e=engine: e)
        assert bench_train._peak_size(cpu, "bf16") == bf16
        assert bench_train._peak_size(cpu, "fp32") == (2048, 8)
        calls.clear()
        bench_train._peak(cpu, "bf16")
        bench_train._peak(cpu, "fp32")
        assert calls == [(torch.bfloat16, *bf16), (torch.float32, 2048, 8)]


def test_decode_benchmark_in_bf16_alone_compares_bf16_with_bf16(monkeypatch, capsys):
    """With --precisions bf16 the base row is bf16: its drift rerun ran in fp32, and the naive
    (fp32) reference was set against bf16 rows. Now the rerun is bf16 and the naive reference,
    fp32 only, is not run without an fp32 row, and says so."""
    from s2s import precision

    if precision.bf16_engine(torch.device("cpu")) is None:
        pytest.skip("no bf16 engine on this CPU: emulated bf16 search takes minutes")
    decode, calls = _decode_spied(monkeypatch)
    monkeypatch.setattr(decode, "naive_beam_search", lambda *a, **k: pytest.fail("naive ran"))
    decode.main(["--quick", "-n", "6", "--single", "--precisions", "bf16", "--threads", "1"])
    # warm-up, beams 1, 2, 12, the drift rerun
    assert [c[:2] for c in calls] == [("bf16", torch.bfloat16)] * 5
    out = capsys.readouterr().out
    assert "naive reference: not run (it runs in fp32, and no fp32 row was asked for)" in out
    assert "load drift: 1 model bf16 beam 12 took" in out


def test_decode_benchmark_refuses_to_compare_ensembles_it_leaves_out(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import decode

    with pytest.raises(SystemExit, match="--single leaves out"):  # it raised a KeyError
        decode.main(["--quick", "-n", "6", "--single", "--alt-combine"])


def _decode_spied(monkeypatch):
    """bench/decode.py with each translate() call recorded: (the plan applied last, its
    mm_dtype, its sentences); on the CPU applying a plan is a no-op, so it is recorded."""
    from s2s import precision
    from s2s.decode import translate as translate_stage

    monkeypatch.setattr(translate_stage, "progress", translate_stage.progress)  # decode sets it
    monkeypatch.syspath_prepend(str(BENCH))
    import decode

    applied, calls = [], []
    monkeypatch.setattr(precision.Precision, "apply", lambda self: applied.append(self.name))
    translate = decode.translate

    def recorded(system, sources, **kw):
        calls.append((applied[-1] if applied else None, kw.get("mm_dtype"), len(sources)))
        return translate(system, sources, **kw)

    monkeypatch.setattr(decode, "translate", recorded)
    return decode, calls

