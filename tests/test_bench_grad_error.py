"""bench/grad_error.py: its errors are measured against fp64 and its mixed recipes are what their
names say."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import common  # noqa: E402
import grad_error  # noqa: E402

import s2s.model.lstm  # noqa: E402
import s2s.train  # noqa: E402
from s2s.arch.rnn import RNNConfig  # noqa: E402
from s2s.data.batching import collate  # noqa: E402
from s2s.data.ids import IdCorpus  # noqa: E402
from s2s.model.seq2seq import Seq2Seq  # noqa: E402


def tiny_corpus() -> common.Corpus:
    pairs = common.synthetic_pairs(48, src_vocab=40, tgt_vocab=50, seed=3)
    return common.Corpus(pairs, common.synthetic_vocab(40, "en"), common.synthetic_vocab(50, "fr"),
                         "synthetic")


def test_fp32_is_within_rounding_of_fp64_and_bf16_is_not():
    res = grad_error.measure(tiny_corpus(), reverse=False, warm_steps=2, batches=2, seed=5,
                             hidden=16, layers=2, batch_size=8, progress=lambda line: None)
    assert set(res) == set(grad_error.RECIPES)
    assert set(res["fp32"]) == {"encoder embedding", "encoder layer 1", "encoder layer 2",
                                "decoder embedding", "decoder layers", "softmax layer",
                                "all parameters"}
    assert max(res["fp32"].values()) < 1e-5  # fp32 against fp64: float rounding only
    for recipe in ("bf16", "bf16, fp32 LSTMs", "bf16, fp32 softmax layer"):
        assert 1e-4 < res[recipe]["all parameters"] < 0.1, recipe  # bf16's 8-bit mantissa
    # the two halves are other computations than bf16 throughout
    assert res["bf16, fp32 LSTMs"] != res["bf16"] != res["bf16, fp32 softmax layer"]


def test_kept_fp32_runs_the_named_part_in_fp32_and_restores_the_model():
    torch.manual_seed(0)
    model = Seq2Seq(RNNConfig(cell="lstm", num_layers=1, hidden_size=8, embed_size=8,
                              reverse_source=True, init_seed=1), src_vocab=20, tgt_vocab=20, pad=0)
    b = collate([([5, 6, 7], [8, 9]), ([5, 6], [9, 10, 11])], pad=0, bos=1, eos=2)
    forward, loss = s2s.model.lstm.StandardLSTM.forward, s2s.train.linear_cross_entropy
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model.features(b.src, b.src_lengths, b.tgt_in).dtype == torch.bfloat16
        with grad_error.kept_fp32(("lstm",)):
            assert model.features(b.src, b.src_lengths, b.tgt_in).dtype == torch.float32
        with grad_error.kept_fp32(("softmax",)):
            feats = model.features(b.src, b.src_lengths, b.tgt_in)
            got = s2s.train.linear_cross_entropy(feats, model.proj.weight, model.proj.bias,
                                                 b.tgt_out, ignore_index=0,
                                                 mm_dtype=torch.bfloat16)
    # the fp32 softmax layer of the bf16 features: the plain fp32 loss of them
    want = torch.nn.functional.cross_entropy(
        torch.nn.functional.linear(feats.float(), model.proj.weight, model.proj.bias)
        .flatten(0, 1), b.tgt_out.flatten(), ignore_index=0, reduction="sum")
    assert got.dtype == torch.float32 and abs(got.item() - want.item()) < 1e-5
    assert s2s.model.lstm.StandardLSTM.forward is forward
    assert s2s.train.linear_cross_entropy is loss


def test_a_parameter_outside_the_table_is_named():
    assert grad_error.part_of("encoder.lstm.weight_hh_l2") == "encoder layer 3"
    with pytest.raises(ValueError, match="'encoder.attn.weight'"):
        grad_error.part_of("encoder.attn.weight")


def test_dev_perplexity_in_fp32_is_the_trainers_and_bf16_is_close():
    corpus = tiny_corpus()
    model = Seq2Seq(RNNConfig(cell="lstm", num_layers=2, hidden_size=16, embed_size=16,
                              reverse_source=True, init_seed=2), src_vocab=40, tgt_vocab=50, pad=0)
    model.init_weights(2)
    vocab, device = corpus.tgt_vocab, torch.device("cpu")
    want = s2s.train.perplexity(model, IdCorpus.from_pairs(corpus.pairs), vocab=vocab,
                                device=device)
    fp32 = grad_error.dev_perplexity(model, corpus.pairs, vocab, None, batch_size=16)
    bf16 = grad_error.dev_perplexity(model, corpus.pairs, vocab, torch.bfloat16, batch_size=16)
    assert abs(fp32 / want - 1) < 1e-5 and fp32 > 40  # near uniform over 50 words at init
    assert bf16 != fp32 and abs(bf16 / fp32 - 1) < 0.01
