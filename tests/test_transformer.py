"""The Transformer (src/s2s/model/transformer.py): masks, attention against the formula and
nn.MultiheadAttention, incremental decoding against teacher forcing, State.select, beam search and
ensembles over it, training, bf16 autocast, the config's checks and the parameter count.

Equivalences (two computations of the same numbers) run in float64, so a tolerance of 1e-10 is
far above rounding and far below any bug; in float32 the rounding of log-probs of magnitude ~5 is
already ~1e-6. Training and bf16 tests run in float32, as training does.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from torch import Tensor, nn

from s2s.data.batching import collate
from s2s.data.vocab import Vocab
from s2s.decode.beam import beam_search, greedy_search, score_sequences
from s2s.decode.ensemble import Ensemble
from s2s.model import build_model
from s2s.model.base import reverse_padded
from s2s.model.seq2seq import RNNConfig
from s2s.model.transformer import Attention, Transformer, TransformerConfig, TransformerState
from helpers import shard_nll
from helpers import exhaustive

torch.set_num_threads(1)

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # as s2s.data.vocab.Vocab
V_SRC, V_TGT = 9, 7  # target: 3 words besides the specials
ATOL = 1e-10  # float64 equivalences


def tiny_config(**overrides) -> TransformerConfig:
    return TransformerConfig(**{"d_model": 16, "heads": 4, "kv_heads": 4, "ff_size": 24,
                                "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.1,
                                "max_positions": 32, **overrides})


def tiny(seed: int = 0, dtype: torch.dtype = torch.float64, **overrides) -> Transformer:
    """A tiny Transformer in eval mode (dropout 0.1 unless overridden: eval must disable it)."""
    model = Transformer(tiny_config(**overrides), src_vocab=V_SRC, tgt_vocab=V_TGT, pad=PAD)
    model.init_weights(seed)
    return model.to(dtype).eval()


def random_batch(seed: int, lengths: list[int], vocab: int = V_SRC) -> tuple[Tensor, Tensor]:
    """Right-padded source ids from the words (ids >= 4) and their lengths."""
    g = torch.Generator().manual_seed(seed)
    lengths_t = torch.tensor(lengths)
    src = torch.randint(4, vocab, (len(lengths), max(lengths)), generator=g)  # (N, S)
    return src.masked_fill(torch.arange(src.size(1)) >= lengths_t[:, None], PAD), lengths_t


def random_targets(seed: int, n: int, length: int) -> Tensor:
    """tgt_in (N, T): <bos> then random words."""
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(4, V_TGT, (n, length - 1), generator=g)
    return torch.cat([torch.full((n, 1), BOS), words], dim=1)


def teacher_forced_lprobs(model, src, lengths, tgt_in) -> Tensor:
    return torch.log_softmax(model(src, lengths, tgt_in), dim=-1)  # (N, T, V)


def incremental_lprobs(model, src, lengths, tgt_in) -> Tensor:
    state = model.encode(src, lengths)
    out = []
    for t in range(tgt_in.size(1)):
        lprobs, state = model.step(tgt_in[:, t], state)  # (N, V)
        out.append(lprobs)
    return torch.stack(out, dim=1)  # (N, T, V)


def state_tensors(state: TransformerState) -> list[Tensor]:
    return [*state.memory_keys, *state.memory_values, state.src_mask, *state.self_keys,
            *state.self_values]


# --- masks -------------------------------------------------------------------------------------

@torch.no_grad()
def test_causal_mask_features_at_t_do_not_see_later_target_tokens():
    model = tiny(1)
    src, lengths = random_batch(1, [5, 3, 4])
    tgt = random_targets(2, 3, 6)
    base = model.features(src, lengths, tgt)  # (N, T, D)
    for t in range(tgt.size(1) - 1):
        changed = tgt.clone()
        changed[:, t + 1:] = (changed[:, t + 1:] - 4 + 1) % (V_TGT - 4) + 4  # every later word
        got = model.features(src, lengths, changed)
        torch.testing.assert_close(got[:, : t + 1], base[:, : t + 1], rtol=0, atol=ATOL)
        assert (got[:, t + 1:] - base[:, t + 1:]).abs().max() > 1e-3  # and later ones do


@torch.no_grad()
@pytest.mark.parametrize("reverse_source", [False, True])
def test_extra_source_padding_changes_no_output(reverse_source):
    model = tiny(2, reverse_source=reverse_source)
    src, lengths = random_batch(3, [5, 2, 4])
    padded = torch.cat([src, torch.full((3, 4), PAD)], dim=1)  # 4 more padding columns
    tgt = random_targets(4, 3, 5)
    torch.testing.assert_close(model.features(padded, lengths, tgt),
                               model.features(src, lengths, tgt), rtol=0, atol=ATOL)
    torch.testing.assert_close(incremental_lprobs(model, padded, lengths, tgt),
                               incremental_lprobs(model, src, lengths, tgt), rtol=0, atol=ATOL)


@torch.no_grad()
@pytest.mark.parametrize("reverse_source", [False, True])
def test_padded_source_positions_get_cross_attention_weight_exactly_zero(reverse_source):
    model = tiny(3, reverse_source=reverse_source)
    src, lengths = random_batch(5, [5, 2, 4])
    src = torch.cat([src, torch.full((3, 2), PAD)], dim=1)
    tgt = random_targets(6, 3, 4)
    w = model.cross_attention(src, lengths, tgt)  # (N, L, H, T, S)
    assert w.shape == (3, 2, 4, 4, 7)
    padded = torch.arange(7)[None, :] >= lengths[:, None]  # (N, S)
    assert torch.equal(w.masked_select(padded[:, None, None, None, :]),
                       torch.zeros(int(padded.sum()) * 2 * 4 * 4, dtype=w.dtype))
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), rtol=0, atol=ATOL)
    assert bool((w.masked_select(~padded[:, None, None, None, :]) > 0).all())


@torch.no_grad()
def test_cross_attention_of_a_reversed_source_model_is_in_the_given_source_order():
    # The same weights with and without reverse_source: the reversing model over src must
    # attend as the plain one over the reversed src, with the source axis un-reversed.
    rev = tiny(4, reverse_source=True)
    plain = tiny(4)
    src, lengths = random_batch(7, [5, 3, 4])
    tgt = random_targets(8, 3, 4)
    torch.testing.assert_close(rev.features(src, lengths, tgt),
                               plain.features(reverse_padded(src, lengths), lengths, tgt),
                               rtol=0, atol=ATOL)
    w_rev = rev.cross_attention(src, lengths, tgt)  # (N, L, H, T, S)
    w_plain = plain.cross_attention(reverse_padded(src, lengths), lengths, tgt)
    for n, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(w_rev[n, ..., :length], w_plain[n, ..., :length].flip(-1),
                                   rtol=0, atol=ATOL)


def test_cross_attention_leaves_the_training_mode_as_it_was():
    model = tiny(5).train()
    src, lengths = random_batch(9, [3, 2])
    w = model.cross_attention(src, lengths, random_targets(9, 2, 3))
    assert model.training
    assert torch.equal(w, model.eval().cross_attention(src, lengths, random_targets(9, 2, 3)))


# --- attention against the formula ---------------------------------------------------------------

def reference_attention(att: Attention, x: Tensor, memory: Tensor, mask: Tensor
                        ) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k) + mask) V with explicit matmuls, head by head, for an attention
    with as many key/value heads as query heads. mask: (N, S) True where attended.
    Returns output (N, T, D) and weights (N, H, T, S)."""
    H, K = att.heads, att.head_size
    Q = x @ att.q_proj.weight.T + att.q_proj.bias  # (N, T, D)
    Km = memory @ att.k_proj.weight.T + att.k_proj.bias  # (N, S, D)
    Vm = memory @ att.v_proj.weight.T + att.v_proj.bias  # (N, S, D)
    additive = torch.zeros(mask.shape, dtype=x.dtype).masked_fill(~mask, -math.inf)  # (N, S)
    heads, weights = [], []
    for h in range(H):
        cols = slice(h * K, (h + 1) * K)
        scores = Q[..., cols] @ Km[..., cols].transpose(1, 2) / math.sqrt(K) + additive[:, None]
        a = torch.softmax(scores, dim=-1)  # (N, T, S)
        heads.append(a @ Vm[..., cols])  # (N, T, K)
        weights.append(a)
    out = torch.cat(heads, dim=-1) @ att.out_proj.weight.T + att.out_proj.bias  # (N, T, D)
    return out, torch.stack(weights, dim=1)


def random_attention(seed: int, heads: int, kv_heads: int, d_model: int = 16) -> Attention:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        att = Attention(d_model, heads, kv_heads, dropout=0.0).double()
        for p in att.parameters():  # the biases too: nn.Linear's init is not enough to test them
            nn.init.uniform_(p, -0.5, 0.5)
    return att.eval()


def attention_inputs(seed: int) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 16, generator=g, dtype=torch.float64)  # (N, T, D)
    memory = torch.randn(2, 5, 16, generator=g, dtype=torch.float64)  # (N, S, D)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 2])[:, None]  # (N, S)
    return x, memory, mask


@torch.no_grad()
def test_multi_head_attention_equals_the_formula_written_out():
    att = random_attention(0, heads=4, kv_heads=4)
    x, memory, mask = attention_inputs(1)
    expected, expected_w = reference_attention(att, x, memory, mask)
    k, v = att.keys_values(memory)
    sdpa, none = att(x, k, v, mask[:, None, None, :])
    assert none is None
    torch.testing.assert_close(sdpa, expected, rtol=0, atol=ATOL)
    explicit, w = att(x, k, v, mask[:, None, None, :], need_weights=True)
    torch.testing.assert_close(explicit, expected, rtol=0, atol=ATOL)
    torch.testing.assert_close(w, expected_w, rtol=0, atol=ATOL)
    assert bool((w[1, ..., 2:] == 0).all())


@torch.no_grad()
def test_multi_head_attention_equals_torch_multihead_attention_with_the_same_weights():
    att = random_attention(1, heads=4, kv_heads=4)
    mha = nn.MultiheadAttention(16, 4, batch_first=True, dtype=torch.float64).eval()
    mha.in_proj_weight.copy_(torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]))
    mha.in_proj_bias.copy_(torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]))
    mha.out_proj.weight.copy_(att.out_proj.weight)
    mha.out_proj.bias.copy_(att.out_proj.bias)
    x, memory, mask = attention_inputs(2)
    expected, expected_w = mha(x, memory, memory, key_padding_mask=~mask, need_weights=True,
                               average_attn_weights=False)
    out, w = att(x, *att.keys_values(memory), mask[:, None, None, :], need_weights=True)
    torch.testing.assert_close(out, expected, rtol=0, atol=ATOL)
    torch.testing.assert_close(w, expected_w, rtol=0, atol=ATOL)
    torch.testing.assert_close(att(x, *att.keys_values(memory), mask[:, None, None, :])[0],
                               expected, rtol=0, atol=ATOL)


def as_multi_head(state: dict[str, Tensor], heads: int, kv_heads: int, head_size: int
                  ) -> dict[str, Tensor]:
    """A grouped-query state dict as multi-head: every key/value head copied to the H / G query
    heads that read it (query head i reads key/value head i // (H / G))."""
    out = {}
    for name, p in state.items():
        if name.endswith(("k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias")):
            p = p.view(kv_heads, head_size, *p.shape[1:]).repeat_interleave(heads // kv_heads, 0)
            p = p.reshape(heads * head_size, *p.shape[2:])
        out[name] = p
    return out


@torch.no_grad()
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_attention_equals_multi_head_with_copied_key_value_heads(kv_heads):
    gqa = random_attention(3, heads=4, kv_heads=kv_heads)
    mha = random_attention(4, heads=4, kv_heads=4)
    mha.load_state_dict(as_multi_head(gqa.state_dict(), 4, kv_heads, 4))
    x, memory, mask = attention_inputs(5)
    expected, expected_w = reference_attention(mha, x, memory, mask)
    for need_weights in (False, True):
        out, w = gqa(x, *gqa.keys_values(memory), mask[:, None, None, :],
                     need_weights=need_weights)
        torch.testing.assert_close(out, expected, rtol=0, atol=ATOL)
    torch.testing.assert_close(w, expected_w, rtol=0, atol=ATOL)


@torch.no_grad()
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_transformer_equals_multi_head_transformer_with_copied_heads(kv_heads):
    gqa = tiny(6, kv_heads=kv_heads)
    mha = tiny(7, kv_heads=4)
    mha.load_state_dict(as_multi_head(gqa.state_dict(), 4, kv_heads, 4))
    src, lengths = random_batch(10, [4, 2, 5])
    tgt = random_targets(11, 3, 4)
    torch.testing.assert_close(teacher_forced_lprobs(gqa, src, lengths, tgt),
                               teacher_forced_lprobs(mha, src, lengths, tgt), rtol=0, atol=ATOL)
    torch.testing.assert_close(incremental_lprobs(gqa, src, lengths, tgt),
                               incremental_lprobs(mha, src, lengths, tgt), rtol=0, atol=ATOL)
    assert gqa.num_parameters() < mha.num_parameters()


# --- incremental decoding ------------------------------------------------------------------------

@torch.no_grad()
@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_incremental_decoding_equals_teacher_forcing(kv_heads, norm, positions):
    model = tiny(8, kv_heads=kv_heads, norm=norm, positions=positions)
    src, lengths = random_batch(12, [5, 2, 4, 1])
    tgt = random_targets(13, 4, 7)
    expected = teacher_forced_lprobs(model, src, lengths, tgt)
    torch.testing.assert_close(incremental_lprobs(model, src, lengths, tgt), expected,
                               rtol=0, atol=ATOL)
    assert expected.dtype == torch.float64


@torch.no_grad()
def test_incremental_decoding_equals_teacher_forcing_with_tied_embeddings_and_reversal():
    model = tiny(9, tie_embeddings=True, reverse_source=True, kv_heads=2,
                 encoder_layers=1, decoder_layers=3)
    assert model.proj.weight is model.tgt_embed.weight
    src, lengths = random_batch(14, [3, 5])
    tgt = random_targets(15, 2, 6)
    torch.testing.assert_close(incremental_lprobs(model, src, lengths, tgt),
                               teacher_forced_lprobs(model, src, lengths, tgt), rtol=0, atol=ATOL)


@torch.no_grad()
def test_step_returns_a_new_state_and_leaves_the_old_one_as_it_was():
    model = tiny(10)
    src, lengths = random_batch(16, [4, 3])
    state = model.encode(src, lengths)
    lp1, state1 = model.step(torch.tensor([BOS, BOS]), state)
    before = [t.clone() for t in state_tensors(state1)]
    lp2, state2 = model.step(torch.tensor([4, 5]), state1)
    lp2_again, _ = model.step(torch.tensor([4, 5]), state1)  # the old state, stepped again
    assert (state.t, state1.t, state2.t) == (0, 1, 2)
    assert [k.size(2) for k in state1.self_keys] == [1, 1]
    assert [k.size(2) for k in state2.self_keys] == [2, 2]
    assert all(torch.equal(a, b) for a, b in zip(before, state_tensors(state1)))
    assert torch.equal(lp2, lp2_again)


@torch.no_grad()
def test_state_select_reorders_repeats_and_drops_every_cache():
    model = tiny(11, kv_heads=2)
    src, lengths = random_batch(17, [5, 2, 4])
    state = model.encode(src, lengths)
    for prev in ([BOS] * 3, [4, 5, 6]):
        _, state = model.step(torch.tensor(prev), state)
    index = torch.tensor([2, 0, 0])  # reorder, repeat and drop row 1
    picked = state.select(index)
    assert isinstance(picked, TransformerState) and picked.t == state.t
    for before, after in zip(state_tensors(state), state_tensors(picked)):
        assert torch.equal(after, before[index])
    prev = torch.tensor([6, 4, 5])
    lp_rows, next_rows = model.step(prev, state)
    lp_picked, next_picked = model.step(prev[index], picked)
    torch.testing.assert_close(lp_picked, lp_rows[index], rtol=0, atol=ATOL)
    # and one more step from the selected state: every cache was carried along
    lp_rows, _ = model.step(prev, next_rows)
    lp_picked, _ = model.step(prev[index], next_picked)
    torch.testing.assert_close(lp_picked, lp_rows[index], rtol=0, atol=ATOL)


def test_positions_beyond_max_positions_are_refused():
    for positions in ("sinusoidal", "learned"):
        model = tiny(12, positions=positions, max_positions=4)
        src, lengths = random_batch(18, [5, 2])
        with pytest.raises(ValueError, match="max_positions"):
            model.encode(src, lengths)
        state = model.encode(src[:, :4], torch.tensor([4, 2]))
        for _ in range(4):
            _, state = model.step(torch.tensor([BOS, BOS]), state)
        with pytest.raises(ValueError, match="max_positions"):
            model.step(torch.tensor([BOS, BOS]), state)


def test_sinusoidal_positions_follow_the_paper():
    model = tiny(13, d_model=8, heads=2, kv_heads=2)
    table = model.tgt_positions(0, 32)  # (P, D)
    for p, i in [(0, 0), (3, 0), (5, 1), (17, 3), (31, 2)]:
        angle = p / 10000 ** (2 * i / 8)
        assert table[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-7)
        assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-7)
    assert "src_positions.table" not in model.state_dict()  # a formula, not a weight


# --- beam search and ensembles -------------------------------------------------------------------

def greedy_by_hand(model, src: Tensor, length: Tensor, *, max_len: int
                   ) -> tuple[tuple[int, ...], float, bool]:
    """argmax of `step` (the lowest id among equals, <pad> never) until <eos> or max_len."""
    state = model.encode(src[None], length[None])
    prev, tokens, score = BOS, [], 0.0
    for _ in range(max_len):
        lprobs, state = model.step(torch.tensor([prev]), state)
        lprobs = lprobs[0].clone()
        lprobs[PAD] = -math.inf
        w = int(lprobs.argmax())
        score += lprobs[w].item()
        if w == EOS:
            return tuple(tokens), score, True
        tokens.append(w)
        prev = w
    return tuple(tokens), score, False


@torch.no_grad()
def test_beam_1_equals_greedy_decoding_by_hand():
    model = tiny(15, kv_heads=2)
    model.proj.bias[EOS] += 1.0  # a likelier <eos>: the batch ends both ways
    src, lengths = random_batch(19, [5, 2, 4, 1, 3, 5])
    max_len = 4
    beam = beam_search(model, src, lengths, beam=1, bos=BOS, eos=EOS, pad=PAD, max_len=max_len)
    greedy = greedy_search(model, src, lengths, bos=BOS, eos=EOS, pad=PAD, max_len=max_len)
    for n in range(len(lengths)):
        tokens, score, finished = greedy_by_hand(model, src[n], lengths[n], max_len=max_len)
        assert (beam[n][0].tokens, beam[n][0].finished) == (tokens, finished)
        assert (greedy[n].tokens, greedy[n].finished) == (tokens, finished)
        assert beam[n][0].score == pytest.approx(score, abs=1e-12)
        assert greedy[n].score == pytest.approx(score, abs=1e-12)
    assert {g.finished for g in greedy} == {True, False}
    assert len({g.tokens for g in greedy}) > 2  # outputs depend on the source


@torch.no_grad()
def test_wide_beam_equals_exhaustive_search_and_scores_equal_teacher_forcing():
    model = tiny(15, kv_heads=1, norm="post")
    src, lengths = random_batch(20, [4, 1, 3])
    max_len, nbest = 3, 40
    # 4 tokens besides <eos>, <pad> and <bos>: at most 4**3 open hypotheses, fewer than the beam
    # of 5**3, so it prunes nothing
    got = beam_search(model, src, lengths, beam=5**max_len, nbest=nbest, bos=BOS, eos=EOS,
                      pad=PAD, max_len=max_len)
    endings = set()
    for n in range(len(lengths)):
        expected = exhaustive(model, src[n], lengths[n], max_len=max_len, vocab=V_TGT,
                              bos=BOS, eos=EOS, pad=PAD)[:nbest]
        assert [(h.tokens, h.finished) for h in got[n]] == [(t, f) for _, t, f in expected]
        assert [h.score for h in got[n]] == pytest.approx([s for s, _, _ in expected], abs=1e-12)
        endings |= {f for _, _, f in expected}
    assert endings == {True, False}
    # n-best scores are the teacher-forced sums: by score_sequences (step by step) and by the
    # model's own teacher forcing (features of the whole sequence at once)
    rows = [(n, h) for n, hs in enumerate(got) for h in hs]
    index = torch.tensor([n for n, _ in rows])
    tgt_lengths = torch.tensor([len(h.tokens) for _, h in rows])
    tgt = torch.full((len(rows), max_len), PAD)
    for r, (_, h) in enumerate(rows):
        tgt[r, : len(h.tokens)] = torch.tensor(h.tokens, dtype=torch.long)
    finished = torch.tensor([h.finished for _, h in rows])
    scores = score_sequences(model, src[index], lengths[index], tgt, tgt_lengths, bos=BOS,
                             eos=EOS, finished=finished)
    assert scores.tolist() == pytest.approx([h.score for _, h in rows], abs=1e-12)
    tgt_in = torch.cat([torch.full((len(rows), 1), BOS), tgt], dim=1)  # (R, max_len + 1)
    tgt_out = torch.cat([tgt, torch.full((len(rows), 1), PAD)], dim=1)
    tgt_out[torch.arange(len(rows)), tgt_lengths] = EOS
    lp = teacher_forced_lprobs(model, src[index], lengths[index], tgt_in)  # (R, T, V)
    token_lp = lp.gather(2, tgt_out[..., None])[..., 0]  # (R, T)
    position = torch.arange(max_len + 1)[None, :]
    counted = (position < tgt_lengths[:, None]) | ((position == tgt_lengths[:, None])
                                                   & finished[:, None])
    sums = torch.where(counted, token_lp, 0.0).sum(1)
    assert sums.tolist() == pytest.approx([h.score for _, h in rows], abs=1e-10)


def tiny_lstm(seed: int):
    cfg = RNNConfig(arch="seq2seq", cell="lstm", num_layers=2, hidden_size=8, embed_size=8,
                      init_range=0.7)
    model = build_model(cfg, src_vocab=V_SRC, tgt_vocab=V_TGT, pad=PAD)
    model.init_weights(seed)
    return model.double().eval()


@torch.no_grad()
def test_an_ensemble_of_a_transformer_and_an_lstm_mixes_their_probabilities():
    members = [tiny(16, kv_heads=2), tiny_lstm(1)]
    src, lengths = random_batch(21, [4, 2, 5])
    for combine in ("mean_prob", "mean_logprob"):
        ensemble = Ensemble(members, combine=combine)
        state = ensemble.encode(src, lengths)
        alone = [m.encode(src, lengths) for m in members]
        for prev in ([BOS] * 3, [4, 5, 6], [6, EOS, 4]):
            prev = torch.tensor(prev)
            lprobs, state = ensemble.step(prev, state)
            steps = [m.step(prev, s) for m, s in zip(members, alone)]
            alone = [s for _, s in steps]
            if combine == "mean_prob":
                expected = torch.stack([lp.exp() for lp, _ in steps]).mean(0).log()  # (N, V)
            else:
                expected = torch.log_softmax((steps[0][0] + steps[1][0]) / 2, dim=-1)
            torch.testing.assert_close(lprobs, expected, rtol=0, atol=1e-12)
    ensemble = Ensemble(members)
    hyps = beam_search(ensemble, src, lengths, beam=3, nbest=2, bos=BOS, eos=EOS, pad=PAD,
                       max_len=5)
    assert [len(h) for h in hyps] == [2, 2, 2]
    rows = [(n, h) for n, hs in enumerate(hyps) for h in hs]
    index = torch.tensor([n for n, _ in rows])
    tgt = torch.full((len(rows), 5), PAD)
    for r, (_, h) in enumerate(rows):
        tgt[r, : len(h.tokens)] = torch.tensor(h.tokens, dtype=torch.long)
    scores = score_sequences(ensemble, src[index], lengths[index], tgt,
                             torch.tensor([len(h.tokens) for _, h in rows]), bos=BOS, eos=EOS,
                             finished=torch.tensor([h.finished for _, h in rows]))
    assert scores.tolist() == pytest.approx([h.score for _, h in rows], abs=1e-12)


# --- training ------------------------------------------------------------------------------------

VOCAB = Vocab(("<pad>", "<unk>", "<bos>", "<eos>") + tuple(f"w{i}" for i in range(4, V_SRC)),
              fingerprint="test")
PAIRS = [([4, 5, 6, 7], [4, 5, 6]), ([8, 4], [6, 6, 5, 4]), ([5, 5, 6], [5]),
         ([7, 8, 4, 5, 6], [4, 6, 5, 5, 6])]


@pytest.mark.parametrize("tie_embeddings", [False, True])
def test_two_sgd_steps_through_shard_nll_reduce_the_loss(tie_embeddings):
    model = tiny(17, dtype=torch.float32, dropout=0.0, tie_embeddings=tie_embeddings).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        nll, ntokens = shard_nll(model, PAIRS, vocab=VOCAB, device=torch.device("cpu"),
                                 autocast=contextlib.nullcontext())
        losses.append(nll.item())
        opt.zero_grad()
        (nll / ntokens).backward()
        if len(losses) == 1:  # every parameter is trained
            assert all(p.grad is not None and p.grad.abs().sum() > 0
                       for p in model.parameters())
            if not tie_embeddings:  # <pad> inputs train nothing (padding_idx)
                assert torch.equal(model.tgt_embed.weight.grad[PAD], torch.zeros(16))
        opt.step()
    assert ntokens == sum(len(t) + 1 for _, t in PAIRS)
    assert losses[0] > losses[1] > losses[2]
    # shard_nll's fused loss is the summed cross-entropy of forward's logits
    b = collate(PAIRS, pad=PAD, bos=BOS, eos=EOS)
    with torch.no_grad():
        plain = nn.functional.cross_entropy(model(b.src, b.src_lengths, b.tgt_in).flatten(0, 1),
                                            b.tgt_out.flatten(), ignore_index=PAD,
                                            reduction="sum")
        fused, _ = shard_nll(model, PAIRS, vocab=VOCAB, device=torch.device("cpu"),
                             autocast=contextlib.nullcontext())
    assert fused.item() == pytest.approx(plain.item(), rel=1e-5)
    assert (model.proj.weight is model.tgt_embed.weight) == tie_embeddings


@torch.no_grad()
def test_dropout_is_active_in_train_mode_and_off_in_eval_mode():
    model = tiny(18, dtype=torch.float32, dropout=0.1)
    src, lengths = random_batch(22, [4, 3])
    tgt = random_targets(23, 2, 5)
    model.train()
    a, b = model.features(src, lengths, tgt), model.features(src, lengths, tgt)
    assert (a - b).abs().max() > 1e-3
    model.eval()
    assert torch.equal(model.features(src, lengths, tgt), model.features(src, lengths, tgt))
    no_dropout = tiny(18, dtype=torch.float32, dropout=0.0).train()
    assert torch.equal(no_dropout.features(src, lengths, tgt),
                       no_dropout.features(src, lengths, tgt))


# --- precision -----------------------------------------------------------------------------------

@torch.no_grad()
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_bf16_autocast_log_probs_are_fp32_and_close_to_fp32(norm):
    model = tiny(19, dtype=torch.float32, kv_heads=2, norm=norm)
    src, lengths = random_batch(24, [5, 2, 4])
    tgt = random_targets(25, 3, 6)
    fp32_tf = teacher_forced_lprobs(model, src, lengths, tgt)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = model.features(src, lengths, tgt)
        bf16_step = incremental_lprobs(model, src, lengths, tgt)
        state = model.encode(src, lengths)
    assert features.dtype == torch.float32  # the residual stream
    assert bf16_step.dtype == torch.float32
    assert state.memory_keys[0].dtype == torch.bfloat16  # the products ran in bf16
    err = (bf16_step - fp32_tf).abs().max().item()
    assert 0 < err < 0.05
    # a state made under autocast steps outside it too
    lprobs, _ = model.step(tgt[:, 0], state)
    assert lprobs.dtype == torch.float32
    torch.testing.assert_close(lprobs, fp32_tf[:, 0], rtol=0, atol=0.05)


def test_bf16_autocast_training_loss_is_close_to_fp32():
    model = tiny(20, dtype=torch.float32, dropout=0.0).train()
    cpu = torch.device("cpu")
    fp32, _ = shard_nll(model, PAIRS, vocab=VOCAB, device=cpu, autocast=contextlib.nullcontext())
    bf16, _ = shard_nll(model, PAIRS, vocab=VOCAB, device=cpu,
                        autocast=torch.autocast("cpu", dtype=torch.bfloat16))
    assert bf16.dtype == torch.float32
    assert bf16.item() == pytest.approx(fp32.item(), rel=0.02)
    bf16.backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@torch.no_grad()
def test_on_cuda_incremental_decoding_equals_teacher_forcing_and_bf16_is_close():
    device = torch.device("cuda")
    model = tiny(21, kv_heads=2).to(device)
    src, lengths = random_batch(26, [5, 2, 4])
    src, tgt = src.to(device), random_targets(27, 3, 6).to(device)  # lengths stay on the CPU
    expected = teacher_forced_lprobs(model, src, lengths, tgt)
    torch.testing.assert_close(incremental_lprobs(model, src, lengths, tgt), expected,
                               rtol=0, atol=ATOL)
    w = model.cross_attention(src, lengths, tgt)
    assert w.device.type == "cuda" and bool((w[1, ..., 2:] == 0).all())
    model.float()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        bf16 = incremental_lprobs(model, src, lengths, tgt)
    assert bf16.dtype == torch.float32
    torch.testing.assert_close(bf16, expected.float(), rtol=0, atol=0.05)
    hyps = beam_search(model, src, lengths, beam=3, bos=BOS, eos=EOS, pad=PAD, max_len=5)
    assert [len(h) for h in hyps] == [1, 1, 1]


# --- config, initialisation, size ----------------------------------------------------------------

def test_config_refuses_heads_not_divisible_by_kv_heads():
    with pytest.raises(ValueError, match="kv_heads"):
        TransformerConfig(heads=8, kv_heads=3)
    with pytest.raises(ValueError, match="d_model"):
        TransformerConfig(d_model=100, heads=8, kv_heads=8)
    for bad in ({"kv_heads": 0}, {"dropout": 1.0}, {"norm": "sandwich"},
                {"positions": "rotary"}, {"arch": "seq2seq"}, {"max_positions": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TransformerConfig(**bad)
    TransformerConfig(heads=8, kv_heads=1)  # multi-query
    TransformerConfig(heads=8, kv_heads=2)  # grouped-query


def test_init_weights_is_deterministic_and_leaves_the_global_rng_alone():
    a = Transformer(tiny_config(), src_vocab=V_SRC, tgt_vocab=V_TGT, pad=PAD)
    b = Transformer(tiny_config(), src_vocab=V_SRC, tgt_vocab=V_TGT, pad=PAD)
    rng = torch.get_rng_state()
    a.init_weights(3)
    b.init_weights(3)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    b.init_weights(4)
    assert not torch.equal(a.proj.weight, b.proj.weight)
    assert torch.equal(a.src_embed.weight[PAD], torch.zeros(16))
    assert torch.equal(a.tgt_embed.weight[PAD], torch.zeros(16))
    layer = a.decoder[0]
    assert torch.equal(layer.ff_norm.weight, torch.ones(16))
    assert torch.equal(layer.ff_norm.bias, torch.zeros(16))
    assert torch.equal(layer.cross_attn.k_proj.bias, torch.zeros(16))
    bound = math.sqrt(6 / (16 + 24))  # Xavier-uniform of ff1: (24, 16)
    w = layer.ff.ff1.weight
    assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
    emb = a.src_embed.weight[1:]
    assert emb.std().item() == pytest.approx(16 ** -0.5, rel=0.25)


@torch.no_grad()
def test_golden_log_probs_of_seeded_models():
    # Pins init_weights and the forward computation: a refactor that changes either fails here.
    model = tiny(1, kv_heads=2)
    src, lengths = random_batch(0, [4, 2])
    lprobs, _ = model.step(torch.tensor([BOS, BOS]), model.encode(src, lengths))
    torch.testing.assert_close(lprobs, GOLDEN_PRE, rtol=0, atol=1e-6)
    model = tiny(2, norm="post", positions="learned", kv_heads=1, tie_embeddings=True)
    lprobs = teacher_forced_lprobs(model, src, lengths, random_targets(1, 2, 3))[:, -1]
    torch.testing.assert_close(lprobs, GOLDEN_POST, rtol=0, atol=1e-6)


GOLDEN_PRE = torch.tensor([  # first step; pre-norm, sinusoidal, 2 kv heads
    [-3.25418834, -1.72051822, -1.64998093, -1.79332312, -1.38200525, -3.13640383, -2.04452753],
    [-1.87332420, -1.05762243, -1.52820363, -2.28302678, -2.43039134, -4.29975536, -2.54296423],
], dtype=torch.float64)
GOLDEN_POST = torch.tensor([  # third position; post-norm, learned, multi-query, tied
    [-2.10965383, -1.21841266, -2.63316857, -2.38833091, -1.54426013, -2.11302034, -2.46456760],
    [-1.97274965, -1.86031789, -3.76787340, -2.05670025, -1.27965858, -1.83007146, -2.15595802],
], dtype=torch.float64)


def expected_parameters(cfg: TransformerConfig, src_vocab: int, tgt_vocab: int) -> int:
    """The module docstring's formula."""
    D, F, H, G = cfg.d_model, cfg.ff_size, cfg.heads, cfg.kv_heads
    K = D // H
    A = 2 * D * D + 2 * D * G * K + 2 * D + 2 * G * K
    ff = 2 * D * F + F + D
    total = ((src_vocab + tgt_vocab) * D + cfg.encoder_layers * (A + ff + 4 * D)
             + cfg.decoder_layers * (2 * A + ff + 6 * D) + tgt_vocab)
    total += 0 if cfg.tie_embeddings else tgt_vocab * D
    total += 4 * D if cfg.norm == "pre" else 0
    total += 2 * cfg.max_positions * D if cfg.positions == "learned" else 0
    return total


@pytest.mark.parametrize("overrides", [
    {}, {"kv_heads": 2}, {"kv_heads": 1, "tie_embeddings": True},
    {"norm": "post", "positions": "learned", "encoder_layers": 1, "decoder_layers": 3},
])
def test_parameter_count_follows_the_formula(overrides):
    cfg = tiny_config(**overrides)
    model = Transformer(cfg, src_vocab=V_SRC, tgt_vocab=V_TGT, pad=PAD)
    assert model.num_parameters() == expected_parameters(cfg, V_SRC, V_TGT)


def test_parameter_count_and_description_of_the_default_profile_size():
    cfg = TransformerConfig(d_model=256, heads=4, kv_heads=2, ff_size=1024, encoder_layers=3,
                            decoder_layers=3)
    model = Transformer(cfg, src_vocab=5900, tgt_vocab=6500, pad=PAD)
    assert model.num_parameters() == expected_parameters(cfg, 5900, 6500) == 9_783_396
    assert model.describe() == ("Transformer, 3+3 layers, d_model 256, 4 heads (2 kv, "
                                "grouped-query), ff 1024, pre-norm, sinusoidal positions, "
                                "dropout 0.1")
    mha = Transformer(TransformerConfig(d_model=256, heads=4, kv_heads=4, ff_size=1024,
                                        encoder_layers=3, decoder_layers=3),
                      src_vocab=5900, tgt_vocab=6500, pad=PAD)
    assert mha.num_parameters() == 10_375_524


def test_a_source_the_length_check_lets_through_fits_the_search():
    """check_lengths and the search compute the longest target alike (float32, an empty line
    counting as one token): at max_len_a 1.4 a 45-token source gives 1.4 x 45 = 63.000004 in
    float32, 63 tokens; in float64 the check said 62, let the line through, and the search ran
    past max_positions mid-way. Every source the check accepts now decodes to its full length
    (an empty one to an empty line, with no search)."""
    from s2s.config import TranslateConfig
    from s2s.decode.translate import check_lengths, max_target_lengths, translate

    model = tiny(3, dtype=torch.float32, max_positions=64)
    with torch.no_grad():
        model.proj.bias[EOS] = -1e4  # never ends a sentence: every search runs to max_len
    vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "a", "b", "c"), "t" * 64)
    cfg = TranslateConfig(max_len_a=1.4, max_len_b=2, device="cpu")
    assert max_target_lengths(torch.tensor([45, 0, 1, 10]), cfg).tolist() == [65, 3, 3, 16]
    for n in (0, 44, 45, 46):
        src = [[4] * n]
        try:
            check_lengths(src, configs=[model.cfg], cfg=cfg, where="test.en")
        except ValueError as e:
            longest = max_target_lengths(torch.tensor([n]), cfg).item()
            assert n >= 45 and str(e).startswith(
                f"test.en:1: {n} tokens, within the 64 positions a member of the system reads "
                f"(max_positions), but the search may write up to {longest} target tokens "
                f"(1.4 x {n} + 2")
            continue
        [[hyp]] = translate(model, src, cfg=cfg, beam=2, nbest=1, vocab=vocab,
                            device=torch.device("cpu"))
        if n == 0:
            assert hyp.tokens == () and hyp.finished
            continue
        assert len(hyp.tokens) == max_target_lengths(torch.tensor([n]), cfg).item()


def test_the_length_check_says_which_limit_a_line_exceeds():
    """A source within max_positions whose longest target is not (700 tokens at 1024 positions:
    the search may write 1.5 x 700 + 5 = 1055) is refused for the target it may write; the
    message said the source was longer than the positions. A source past them is refused as
    one."""
    from s2s.config import TranslateConfig
    from s2s.decode.translate import check_lengths

    configs = [tiny(3, max_positions=1024).cfg]
    cfg = TranslateConfig(max_len_a=1.5, max_len_b=5, device="cpu")
    with pytest.raises(ValueError) as e:
        check_lengths([[4] * 3, [4] * 700], configs=configs, cfg=cfg, where="in.en",
                      lines=[7, 9])
    assert str(e.value) == (
        "in.en:9: 700 tokens, within the 1024 positions a member of the system reads "
        "(max_positions), but the search may write up to 1055 target tokens (1.5 x 700 + 5: "
        "translate.max_len_a and max_len_b), more than the 1024 it writes; split the line, "
        "lower max_len_a or max_len_b, or use a recurrent system")
    with pytest.raises(ValueError) as e:
        check_lengths([[4] * 1025], configs=configs, cfg=cfg, where="in.en")
    assert str(e.value) == (
        "in.en:1: 1025 tokens: longer than the 1024 positions a member of the system reads "
        "(max_positions); split the line or use a recurrent system")
    check_lengths([[4] * 679], configs=configs, cfg=cfg, where="in.en")  # 1023 target tokens


def test_a_hypothesis_cut_at_max_positions_is_scored_again_in_fp32_under_bf16():
    """Under bf16 products the n-best lists are scored again in fp32 (score_sequences): a
    hypothesis cut at max_len takes max_len steps there, none for an <EOS> it does not have. At
    max_len == max_positions the rescoring took one step more and ran past the positions, on a
    source the length check had let through."""
    from s2s.config import TranslateConfig
    from s2s.decode.translate import check_lengths, translate

    model = tiny(3, dtype=torch.float32, max_positions=16)
    with torch.no_grad():
        model.proj.bias[EOS] = -1e4  # never ends a sentence: every hypothesis is cut
    vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "a", "b", "c"), "t" * 64)
    cfg = TranslateConfig(max_len_a=1.5, max_len_b=10, device="cpu")
    src = [[4, 5, 6, 7]]  # 1.5 x 4 + 10 = 16 target tokens = max_positions
    check_lengths(src, configs=[model.cfg], cfg=cfg, where="test.en")
    cpu = torch.device("cpu")
    [got] = translate(model, src, cfg=cfg, beam=3, nbest=3, vocab=vocab, device=cpu,
                      mm_dtype=torch.bfloat16)
    [fp32] = translate(model, src, cfg=cfg, beam=3, nbest=3, vocab=vocab, device=cpu)
    assert [(len(h.tokens), h.finished) for h in got] == [(16, False)] * 3
    tgt = torch.tensor([h.tokens for h in got])
    scores = score_sequences(model, torch.tensor(src * 3), torch.tensor([4] * 3), tgt,
                             torch.tensor([16] * 3), bos=BOS, eos=EOS,
                             finished=torch.tensor([False] * 3))
    assert [h.score for h in got] == pytest.approx(scores.tolist(), abs=1e-5)
    same = {h.tokens: h.score for h in fp32}  # the fp32 search's own scores, where it agrees
    assert any(h.tokens in same for h in got)
    for h in got:
        if h.tokens in same:
            assert h.score == pytest.approx(same[h.tokens], abs=1e-4)

