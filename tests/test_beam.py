"""Beam search, greedy search, sequence scoring and ensembles (src/s2s/decode/).

Search is tested the fairseq / OpenNMT way: a ScriptedModel whose step returns hand-written
probability tables, so tokens and scores are known exactly; then tiny random models (a GRU written
here, and each architecture of s2s.model) check beam 1 == greedy, a wide beam == exhaustive search,
and batched == one sentence at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn

from s2s.decode.beam import Hypothesis, beam_search, greedy_search, score_sequences
from s2s.decode.ensemble import Ensemble, EnsembleState
from s2s.model import build_model
from s2s.model.seq2seq import RNNConfig

from helpers import A, B, BOS, C, EOS, PAD, V, ScriptedModel, exhaustive

log = math.log


def scripted_src(n: int) -> tuple[Tensor, Tensor]:
    """Sources that make sentence i follow script i."""
    return torch.arange(n).unsqueeze(1), torch.ones(n, dtype=torch.long)


def search(model: ScriptedModel, **kwargs) -> list[list[Hypothesis]]:
    src, lengths = scripted_src(len(model.scripts))
    kwargs.setdefault("max_len", 10)
    return beam_search(model, src, lengths, bos=BOS, eos=EOS, pad=PAD, **kwargs)


def assert_hyps(got: list[Hypothesis], expected: list[tuple[tuple[int, ...], float, bool]]) -> None:
    assert [(h.tokens, h.finished) for h in got] == [(t, f) for t, _, f in expected]
    assert [h.score for h in got] == pytest.approx([s for _, s, _ in expected], abs=1e-12)


# Greedy takes A (0.5) and ends with A C <EOS> (0.2); B <EOS> (0.36) is better.
GARDEN = {(): {A: 0.5, B: 0.4, EOS: 0.1}, (A,): {A: 0.3, B: 0.3, C: 0.4}, (B,): {EOS: 0.9, C: 0.1}}
NEVER_EOS = {t: {A: 0.7, B: 0.3} for t in range(10)}


def test_beam_1_is_greedy_and_follows_the_garden_path():
    expected = [((A, C), log(0.5) + log(0.4), True)]
    assert_hyps(search(ScriptedModel(GARDEN), beam=1)[0], expected)
    src, lengths = scripted_src(1)
    greedy = greedy_search(ScriptedModel(GARDEN), src, lengths, bos=BOS, eos=EOS, max_len=10,
                           pad=PAD)
    assert_hyps(greedy, expected)


def test_beam_1_is_greedy_where_two_log_probs_tie_in_the_running_sum():
    """After a first word of log-prob -30, two words of log-probs -0.6931475 (id 4) and
    -0.6931470 (id 5) add to the same fp32 sum: beam 1 ranks the sums and takes the lower id;
    greedy took the larger log-prob, another sentence of the same score."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Steps:
        t: torch.Tensor

        def select(self, index):
            return Steps(self.t.index_select(0, index))

    class Model:
        def encode(self, src, lengths):
            return Steps(torch.zeros(len(src), dtype=torch.long))

        def step(self, prev, state):
            lprobs = torch.full((len(prev), 6), -50.0)
            for row, t in enumerate(state.t.tolist()):
                if t == 0:
                    lprobs[row, 3] = -30.0
                elif t == 1:
                    lprobs[row, 4], lprobs[row, 5] = -0.6931475, -0.6931470
                else:
                    lprobs[row, 2] = -1e-3
            return lprobs, Steps(state.t + 1)

    assert torch.tensor(-30.0) + torch.tensor(-0.6931475) == torch.tensor(-30.0) + torch.tensor(
        -0.6931470)
    src, lengths = torch.tensor([[3]]), torch.tensor([1])
    kwargs = dict(bos=1, eos=2, pad=0, max_len=5)
    greedy = greedy_search(Model(), src, lengths, **kwargs)[0]
    (beam,), = beam_search(Model(), src, lengths, beam=1, **kwargs)
    assert greedy == beam and greedy.tokens == (3, 4) and greedy.finished


def test_beam_2_finds_the_better_sequence_greedy_misses_and_stops_early():
    model = ScriptedModel(GARDEN)
    assert_hyps(search(model, beam=2)[0], [((B,), log(0.4) + log(0.9), True)])
    # Step 2 finishes B <EOS> (0.36) above every open prefix (best: A C, 0.2): no step 3.
    assert model.rows_per_step == [2, 2]


def test_nbest_lists_finished_hypotheses_best_first():
    got = search(ScriptedModel(GARDEN), beam=2, nbest=3)[0]
    # A B (0.15, tied with A A but on a later token id) fell out of the beam at step 2.
    assert_hyps(got, [
        ((B,), log(0.4) + log(0.9), True),
        ((A, C), log(0.5) + log(0.4), True),
        ((A, A), log(0.5) + log(0.3), True),
    ])


def test_hypothesis_that_takes_eos_leaves_the_beam_and_the_search_continues():
    script = {(): {A: 0.6, EOS: 0.3, B: 0.1}, (A,): {EOS: 0.8, C: 0.2}}
    model = ScriptedModel(script)
    got = search(model, beam=2, nbest=2)[0]
    # <EOS> at step 1 (0.3) finished the empty hypothesis while A (0.6) kept searching.
    assert_hyps(got, [((A,), log(0.6) + log(0.8), True), ((), log(0.3), True)])
    assert model.rows_per_step == [2, 2]


def test_stops_as_soon_as_the_best_finished_hypothesis_beats_every_open_one():
    model = ScriptedModel({(): {EOS: 0.5, A: 0.3, B: 0.2}})
    assert_hyps(search(model, beam=3, max_len=10)[0], [((), log(0.5), True)])
    assert model.rows_per_step == [3]  # one finished of three, but no open prefix can catch up


def test_nbest_beyond_the_beam_keeps_searching_until_nbest_are_finished():
    """Rule 2 stops at max(beam, nbest) finished hypotheses: at beam 1, nbest 2 the search goes
    on past the first finished one to give two."""
    model = ScriptedModel({(): {A: 0.6, EOS: 0.4}, (A,): {EOS: 0.6, B: 0.4},
                           (A, B): {EOS: 1.0}})
    got = search(model, beam=1, nbest=2, max_len=10)[0]
    assert_hyps(got, [((A,), log(0.36), True), ((A, B), log(0.24), True)])


def test_stops_with_beam_finished_hypotheses_even_if_an_open_one_scores_higher():
    model = ScriptedModel({(): {A: 0.6, EOS: 0.3, B: 0.1}, (A,): {C: 0.9, EOS: 0.1}})
    got = search(model, beam=2, nbest=2)[0]
    # After step 2: finished <EOS> (0.3) and B <EOS> (0.1); A C (0.54) is still open but the
    # sentence has beam=2 finished hypotheses: it stops (the documented search approximation).
    assert_hyps(got, [((), log(0.3), True), ((B,), log(0.1), True)])
    assert model.rows_per_step == [2, 2]


def test_max_len_cuts_open_hypotheses_and_marks_them_unfinished():
    model = ScriptedModel(NEVER_EOS)
    got = search(model, beam=2, nbest=3, max_len=3)[0]
    # A A B and A B A tie at 0.147: A A B grows from the earlier beam, so it ranks first and the
    # beam keeps it. Only two hypotheses exist at the end: nbest=3 returns two.
    assert_hyps(got, [
        ((A, A, A), 3 * log(0.7), False),
        ((A, A, B), 2 * log(0.7) + log(0.3), False),
    ])
    assert model.rows_per_step == [2, 2, 2]


def test_cut_hypotheses_compete_with_finished_ones_at_max_len():
    script = {(): {A: 0.9, EOS: 0.1}, (A,): {A: 0.9, EOS: 0.1}}
    got = search(ScriptedModel(script), beam=2, nbest=3, max_len=2)[0]
    assert_hyps(got, [
        ((A, A), 2 * log(0.9), False),
        ((), log(0.1), True),
        ((A,), log(0.9) + log(0.1), True),
    ])
    # With a length penalty a cut hypothesis is ranked at its own length (2 predictions, as a
    # hypothesis finished at step 2 is): score / ((5 + 2) / 6). Raw log-prob order is A <EOS>
    # (0.318), <EOS> (0.3), A A (0.282); the penalty puts A A above <EOS> and leaves A <EOS>
    # first, where ranking A A at 3 predictions would put it above A <EOS>.
    script = {(): {A: 0.6, EOS: 0.3, B: 0.1}, (A,): {A: 0.47, EOS: 0.53}}
    got = search(ScriptedModel(script), beam=2, nbest=3, max_len=2, length_penalty=1.0)[0]
    assert_hyps(got, [
        ((A,), log(0.6) + log(0.53), True),
        ((A, A), log(0.6) + log(0.47), False),
        ((), log(0.3), True),
    ])
    assert_hyps(search(ScriptedModel(script), beam=2, nbest=3, max_len=2)[0], [
        ((A,), log(0.6) + log(0.53), True),
        ((), log(0.3), True),
        ((A, A), log(0.6) + log(0.47), False),
    ])


def test_equal_scores_rank_the_earlier_beam_then_the_lower_token_id():
    # <EOS> (id 2) and A (id 3) tie at step 1: the lower id wins, for beam 1 and for greedy.
    tie = {(): {EOS: 0.5, A: 0.5}}
    assert_hyps(search(ScriptedModel(tie), beam=1)[0], [((), log(0.5), True)])
    src, lengths = scripted_src(1)
    greedy = greedy_search(ScriptedModel(tie), src, lengths, bos=BOS, eos=EOS, max_len=5)
    assert_hyps(greedy, [((), log(0.5), True)])
    # A and B tie at step 1; both then end (0.4 each): A <EOS> grew from beam 0, so it comes first.
    ab = {(): {A: 0.4, B: 0.4, EOS: 0.2}}
    assert_hyps(search(ScriptedModel(ab), beam=1)[0], [((A,), log(0.4), True)])
    assert_hyps(search(ScriptedModel(ab), beam=2, nbest=2)[0],
                [((A,), log(0.4), True), ((B,), log(0.4), True)])


def test_doesnt_predict_eos_if_shorter_than_min_len():
    script = {(): {EOS: 0.9, A: 0.1}, (A,): {EOS: 0.8, B: 0.2}}
    assert_hyps(search(ScriptedModel(script), beam=2, min_len=0)[0], [((), log(0.9), True)])
    assert_hyps(search(ScriptedModel(script), beam=2, min_len=1)[0],
                [((A,), log(0.1) + log(0.8), True)])
    # The score stays the model's log-prob of the tokens taken: no renormalising the masked <EOS>.
    expected = [((A, B), log(0.1) + log(0.2), True)]
    assert_hyps(search(ScriptedModel(script), beam=2, min_len=2)[0], expected)
    src, lengths = scripted_src(1)
    greedy = greedy_search(ScriptedModel(script), src, lengths, bos=BOS, eos=EOS, max_len=5,
                           min_len=2)
    assert_hyps(greedy, expected)


def test_never_predicts_bos_and_scores_the_rest_unrenormalised():
    # <BOS> is the likeliest word at step 1, but it is never a target: without the ban beam 1 and
    # greedy would write "<bos>" (BOS then <EOS>, 0.6), and beam 2 would list it first.
    script = {(): {BOS: 0.6, A: 0.3, EOS: 0.1}, (A,): {EOS: 1.0}}
    best = ((A,), log(0.3) + log(1.0), True)  # the model's log-prob: the ban does not renormalise
    assert_hyps(search(ScriptedModel(script), beam=1)[0], [best])
    assert_hyps(search(ScriptedModel(script), beam=2, nbest=2)[0], [best, ((), log(0.1), True)])
    src, lengths = scripted_src(1)
    greedy = greedy_search(ScriptedModel(script), src, lengths, bos=BOS, eos=EOS, max_len=10,
                           pad=PAD)
    assert_hyps(greedy, [best])
    # the same without a pad id, and through an ensemble
    ensemble = Ensemble([ScriptedModel(script), ScriptedModel(script)])
    assert_hyps(beam_search(ensemble, src, lengths, beam=2, nbest=2, bos=BOS, eos=EOS,
                            max_len=10)[0], [best, ((), log(0.1), True)])
    # and the score is the one teacher forcing recomputes (the n-best lists' fp32 rescoring)
    again = score_sequences(ScriptedModel(script), src, lengths, torch.tensor([[A]]),
                            torch.tensor([1]), bos=BOS, eos=EOS)
    assert again.tolist() == pytest.approx([best[1]], abs=1e-12)


def test_length_penalty_ranks_finished_hypotheses_by_gnmt_normalised_score():
    script = {(): {A: 0.5, EOS: 0.4, B: 0.1}, (A,): {C: 0.7, EOS: 0.3}}
    # alpha = 0 (the paper): <EOS> at step 1 (0.4) beats the best open prefix A C (0.35): stop.
    model = ScriptedModel(script)
    assert_hyps(search(model, beam=4, length_penalty=0.0)[0], [((), log(0.4), True)])
    assert model.rows_per_step == [4, 4]
    # alpha = 1: log(0.4) / 1 = -0.916 loses to A C <EOS>: log(0.35) / ((5 + 3) / 6) = -0.787.
    # (A <EOS> is log(0.15) / (7/6) = -1.626, B <EOS> log(0.1) / (7/6) = -1.974.) The score
    # reported stays the raw log-prob.
    model = ScriptedModel(script)
    got = search(model, beam=4, nbest=2, length_penalty=1.0)[0]
    assert_hyps(got, [((A, C), log(0.5) + log(0.7), True), ((), log(0.4), True)])
    assert model.rows_per_step == [4, 4, 4]


def test_the_length_penalty_counts_eos_and_stops_only_when_no_open_prefix_can_win():
    """GNMT's lp(L) = ((5 + L) / 6)^alpha with L the tokens predicted, <EOS> included; the search
    stops when no open prefix, at the longest length it may reach, could beat the best finished
    one."""
    # () <EOS>: log(0.55) / lp(1) = -0.598 beats A C <EOS>: log(0.44) / lp(3) = -0.616 (with
    # L counting no <EOS>: -0.717 against -0.704, the other order)
    script = {(): {EOS: 0.55, A: 0.44, B: 0.01}, (A,): {C: 1.0}, (A, C): {EOS: 1.0},
              (B,): {EOS: 1.0}}
    got = search(ScriptedModel(script), beam=4, nbest=2, length_penalty=1.0)[0]
    assert_hyps(got, [((), log(0.55), True), ((A, C), log(0.44), True)])
    # after step 1, () <EOS> scores log(0.5) = -0.693; A may still finish longer, with a larger
    # lp: A <EOS>, log(0.45) / lp(2) = -0.684, wins. A bound at the current length would stop.
    script = {(): {EOS: 0.5, A: 0.45, B: 0.05}, (A,): {EOS: 1.0}}
    got = search(ScriptedModel(script), beam=2, length_penalty=1.0)[0]
    assert_hyps(got, [((A,), log(0.45), True)])


def test_never_returns_hypotheses_of_probability_zero():
    # A wide beam over a model with one possible sentence: the -inf candidates that fill the
    # beam (<EOS> of the beams not expanded at step 1 among them) never finish or count.
    got = search(ScriptedModel({(): {A: 1.0}}), beam=12, nbest=3)[0]
    assert_hyps(got, [((A,), 0.0, True)])


def test_finished_sentences_leave_the_batch_and_keep_their_results():
    model = ScriptedModel({(): {EOS: 1.0}}, GARDEN)
    got = search(model, beam=2)
    assert_hyps(got[0], [((), 0.0, True)])
    assert_hyps(got[1], [((B,), log(0.4) + log(0.9), True)])
    assert model.rows_per_step == [4, 2]  # sentence 0 is done after step 1: its 2 rows go


def test_max_len_per_sentence_removes_each_sentence_at_its_own_limit():
    model = ScriptedModel(NEVER_EOS, NEVER_EOS, NEVER_EOS)
    got = search(model, beam=1, max_len=torch.tensor([2, 1, 3]))
    assert_hyps(got[0], [((A, A), 2 * log(0.7), False)])
    assert_hyps(got[1], [((A,), log(0.7), False)])
    assert_hyps(got[2], [((A, A, A), 3 * log(0.7), False)])
    assert model.rows_per_step == [3, 2, 1]


def test_rejects_arguments_that_define_no_search():
    src, lengths = scripted_src(1)
    model = ScriptedModel(GARDEN)
    for bad, message in (({"beam": 0}, r"^beam must be >= 1, got 0$"),
                         ({"nbest": 0}, r"^nbest must be >= 1, got 0$"),
                         ({"max_len": 0}, r"^max_len must be >= 1, got \[0\]$"),
                         ({"length_penalty": -1.0}, r"^length_penalty must be >= 0, got -1\.0$"),
                         ({"min_len": -1}, r"^min_len must be >= 0, got -1$")):
        kwargs = {"beam": 2, "max_len": 5} | bad
        with pytest.raises(ValueError, match=message):
            beam_search(model, src, lengths, bos=BOS, eos=EOS, **kwargs)


# A tiny random model: embeddings, a GRU cell each side, a linear layer, and an <EOS> logit that
# grows with the step, so sentences end at different lengths. float64, so scores computed along
# different paths (batched, one at a time, by hand) agree to 1e-12.
@dataclass(frozen=True)
class TinyState:
    h: Tensor  # (N, H)
    t: Tensor  # (N,) steps taken

    def select(self, index: Tensor) -> TinyState:
        return TinyState(self.h.index_select(0, index), self.t.index_select(0, index))


class TinyGRU(nn.Module):
    def __init__(self, seed: int, dim: int = 16, init_range: float = 1.0,
                 eos_slope: float = 1.0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.src_emb = nn.Embedding(V, dim)
            self.encoder = nn.GRUCell(dim, dim)
            self.tgt_emb = nn.Embedding(V, dim)
            self.decoder = nn.GRUCell(dim, dim)
            self.out = nn.Linear(dim, V)
            for p in self.parameters():  # wider than the default init: outputs depend on the source
                nn.init.uniform_(p, -init_range, init_range)
        self.eos_slope = eos_slope
        self.double().eval()

    def encode(self, src: Tensor, lengths: Tensor) -> TinyState:
        h = torch.zeros(src.size(0), self.encoder.hidden_size, dtype=torch.float64)  # (N, H)
        for t in range(src.size(1)):
            h_next = self.encoder(self.src_emb(src[:, t]), h)
            h = torch.where((t < lengths).unsqueeze(1), h_next, h)  # padding leaves h as it is
        return TinyState(h, torch.zeros(src.size(0), dtype=torch.long))

    def step(self, prev_tokens: Tensor, state: TinyState) -> tuple[Tensor, TinyState]:
        h = self.decoder(self.tgt_emb(prev_tokens), state.h)  # (N, H)
        logits = self.out(h)  # (N, V)
        logits[:, EOS] += self.eos_slope * (state.t - 3)
        return torch.log_softmax(logits, dim=-1), TinyState(h, state.t + 1)


@dataclass(frozen=True)
class RampState:
    inner: object  # the wrapped model's state
    t: Tensor  # (N,) steps taken

    def select(self, index: Tensor) -> RampState:
        return RampState(self.inner.select(index), self.t.index_select(0, index))


class EosRamp:
    """One of the package's models (s2s.model.build_model) in float64 over the V-word vocabulary,
    with TinyGRU's growing <EOS> logit so that sentences end at different lengths. The search
    sees the model's own encode, step and State.select (attention memory included)."""

    def __init__(self, arch: str, cell: str, seed: int, eos_slope: float = 1.0) -> None:
        cfg = RNNConfig(arch=arch, cell=cell, num_layers=2, hidden_size=8, embed_size=8,
                          init_range=0.7)  # wide: outputs depend on the source
        self.model = build_model(cfg, src_vocab=V, tgt_vocab=V, pad=PAD)
        self.model.init_weights(seed)
        self.model.double().eval()
        self.eos_slope = eos_slope

    def encode(self, src: Tensor, lengths: Tensor) -> RampState:
        return RampState(self.model.encode(src, lengths), torch.zeros(len(src), dtype=torch.long))

    def step(self, prev_tokens: Tensor, state: RampState) -> tuple[Tensor, RampState]:
        lprobs, inner = self.model.step(prev_tokens, state.inner)  # (N, V)
        lprobs = lprobs.clone()
        lprobs[:, EOS] += self.eos_slope * (state.t - 3)
        return torch.log_softmax(lprobs, dim=-1), RampState(inner, state.t + 1)


# The search tests below run on each kind of model: TinyGRU and the package's architectures.
MODELS = {
    "tiny_gru": TinyGRU,
    # seed + 1: the seeds under which the tests' batches exercise both endings (finished, cut)
    "seq2seq_lstm": lambda seed: EosRamp("seq2seq", "lstm", seed + 1),
    "cho_gru": lambda seed: EosRamp("cho", "gru", seed),
    "attention_lstm": lambda seed: EosRamp("attention", "lstm", seed),
    "attention_gru": lambda seed: EosRamp("attention", "gru", seed),
}


@pytest.fixture(params=sorted(MODELS))
def make_model(request):
    return MODELS[request.param]


def random_batch(seed: int, lengths: list[int]) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths_t = torch.tensor(lengths)
    src = torch.randint(A, V, (len(lengths), max(lengths)), generator=g)  # (N, S)
    return src.masked_fill(torch.arange(src.size(1)) >= lengths_t.unsqueeze(1), PAD), lengths_t


def as_tuples(hyps: list[Hypothesis]) -> list[tuple[tuple[int, ...], float, bool]]:
    return [(h.tokens, h.score, h.finished) for h in hyps]


def test_beam_1_equals_greedy_on_a_batch_of_random_sentences(make_model):
    model = make_model(0)
    src, lengths = random_batch(1, [5, 2, 4, 1, 3, 5])
    max_len = torch.tensor([6, 3, 8, 2, 5, 7])
    beam = beam_search(model, src, lengths, beam=1, bos=BOS, eos=EOS, pad=PAD, max_len=max_len)
    greedy = greedy_search(model, src, lengths, bos=BOS, eos=EOS, pad=PAD, max_len=max_len)
    assert [b[0].tokens for b in beam] == [g.tokens for g in greedy]
    assert [b[0].finished for b in beam] == [g.finished for g in greedy]
    assert [b[0].score for b in beam] == pytest.approx([g.score for g in greedy], abs=1e-12)
    assert {g.finished for g in greedy} == {True, False}  # the batch exercises both endings


def test_wide_beam_equals_exhaustive_search(make_model):
    model = make_model(0)
    src, lengths = random_batch(2, [4, 1, 3])
    max_len = 4
    # 3 tokens besides <EOS>, <PAD> and <BOS>: 3**4 hypotheses can be open, fewer than the beam
    # of 4**4, so it prunes nothing.
    got = beam_search(model, src, lengths, beam=4**max_len, nbest=5, bos=BOS, eos=EOS, pad=PAD,
                      max_len=max_len)
    endings = set()
    for i in range(len(lengths)):
        expected = exhaustive(model, src[i], lengths[i], max_len=max_len)[:5]
        assert_hyps(got[i], [(toks, s, f) for s, toks, f in expected])
        endings |= {f for _, _, f in expected}
    assert endings == {True, False}  # <EOS>-ended and cut hypotheses both rank


def test_batched_search_equals_one_sentence_at_a_time(make_model):
    model = make_model(0)
    src, lengths = random_batch(3, [5, 2, 4, 1])
    max_len = torch.tensor([4, 6, 3, 5])
    kwargs = dict(beam=3, nbest=3, bos=BOS, eos=EOS, pad=PAD)
    batched = beam_search(model, src, lengths, max_len=max_len, **kwargs)
    for i in range(len(lengths)):
        one = slice(i, i + 1)
        alone = beam_search(model, src[one], lengths[one], max_len=max_len[one], **kwargs)
        assert len(batched[i]) == 3
        assert_hyps(batched[i], as_tuples(alone[0]))
    assert {h.finished for hs in batched for h in hs} == {True, False}


def test_score_sequences_sums_the_step_log_probs_by_hand():
    early_eos = {(): {A: 0.6, EOS: 0.3, B: 0.1}, (A,): {EOS: 0.8, C: 0.2}}
    model = ScriptedModel(GARDEN, early_eos, GARDEN)
    src, lengths = scripted_src(3)
    tgt = torch.tensor([[A, C], [A, PAD], [PAD, PAD]])
    got = score_sequences(model, src, lengths, tgt, torch.tensor([2, 1, 0]), bos=BOS, eos=EOS)
    expected = [log(0.5) + log(0.4) + log(1.0), log(0.6) + log(0.8), log(0.1)]
    assert got.tolist() == pytest.approx(expected, abs=1e-12)


def test_score_sequences_equals_the_score_beam_search_reports(make_model):
    model = make_model(4)
    src, lengths = random_batch(4, [3, 5, 2])
    hyps = beam_search(model, src, lengths, beam=3, nbest=3, bos=BOS, eos=EOS, pad=PAD, max_len=6)
    rows = [(i, h) for i, hs in enumerate(hyps) for h in hs if h.finished]
    assert len(rows) >= 5  # only finished hypotheses have an <EOS> for score_sequences to add
    index = torch.tensor([i for i, _ in rows])
    tgt_lengths = torch.tensor([len(h.tokens) for _, h in rows])
    tgt = torch.full((len(rows), int(tgt_lengths.max())), PAD)
    for r, (_, h) in enumerate(rows):
        tgt[r, : len(h.tokens)] = torch.tensor(h.tokens, dtype=torch.long)
    got = score_sequences(model, src[index], lengths[index], tgt, tgt_lengths, bos=BOS, eos=EOS)
    assert got.tolist() == pytest.approx([h.score for _, h in rows], abs=1e-12)


def test_ensemble_of_one_model_decodes_as_the_model(make_model):
    model = make_model(4)
    src, lengths = random_batch(5, [4, 2, 5])
    kwargs = dict(beam=3, nbest=3, bos=BOS, eos=EOS, pad=PAD, max_len=6)
    alone = beam_search(model, src, lengths, **kwargs)
    assert beam_search(Ensemble([model]), src, lengths, **kwargs) == alone  # exactly
    single = Ensemble([model], combine="mean_logprob")
    lprobs, _ = single.step(torch.full((3,), BOS), single.encode(src, lengths))
    expected, _ = model.step(torch.full((3,), BOS), model.encode(src, lengths))
    torch.testing.assert_close(lprobs, expected, rtol=0, atol=1e-12)


TWO_MEMBERS = ({(): {A: 0.5, B: 0.3, EOS: 0.2}}, {(): {A: 0.1, B: 0.3, EOS: 0.6}})


def test_mean_prob_ensemble_is_the_mixture_of_the_members_probabilities():
    ensemble = Ensemble([ScriptedModel(TWO_MEMBERS[0]), ScriptedModel(TWO_MEMBERS[1])])
    src, lengths = scripted_src(1)
    lprobs, _ = ensemble.step(torch.tensor([BOS]), ensemble.encode(src, lengths))
    mixture = {A: 0.3, B: 0.3, EOS: 0.4}  # (p1 + p2) / 2
    expected = [log(mixture[w]) if w in mixture else -math.inf for w in range(V)]
    assert lprobs[0].tolist() == pytest.approx(expected, abs=1e-12)
    # Member 1 alone says A, member 2 says <EOS>; the mixture's argmax is <EOS>.
    got = beam_search(ensemble, src, lengths, beam=1, bos=BOS, eos=EOS, max_len=5)
    assert_hyps(got[0], [((), log(0.4), True)])


def test_an_ensemble_of_different_architectures_mixes_their_probabilities():
    members = [EosRamp(arch, cell, seed).model for arch, cell, seed in
               (("seq2seq", "lstm", 1), ("cho", "gru", 2), ("attention", "gru", 3))]
    ensemble = Ensemble(members)  # mean_prob through the members' own softmax layers
    src, lengths = random_batch(6, [4, 2, 5])
    state = ensemble.encode(src, lengths)
    alone = [m.encode(src, lengths) for m in members]
    for prev in ([BOS] * 3, [A, B, C], [C, EOS, A]):
        prev = torch.tensor(prev)
        lprobs, state = ensemble.step(prev, state)
        steps = [m.step(prev, s) for m, s in zip(members, alone)]
        alone = [s for _, s in steps]
        mixture = torch.stack([lp.exp() for lp, _ in steps]).mean(0)  # (N, V)
        torch.testing.assert_close(lprobs, mixture.log(), rtol=0, atol=1e-12)
    hyps = beam_search(ensemble, src, lengths, beam=3, bos=BOS, eos=EOS, pad=PAD, max_len=5)
    assert [len(h) for h in hyps] == [1, 1, 1]


def test_mean_logprob_ensemble_is_the_renormalised_geometric_mean():
    ensemble = Ensemble([ScriptedModel(m) for m in TWO_MEMBERS], combine="mean_logprob")
    src, lengths = scripted_src(1)
    lprobs, _ = ensemble.step(torch.tensor([BOS]), ensemble.encode(src, lengths))
    geo = {w: math.sqrt(TWO_MEMBERS[0][()][w] * TWO_MEMBERS[1][()][w]) for w in (A, B, EOS)}
    total = sum(geo.values())
    expected = [log(geo[w] / total) if w in geo else -math.inf for w in range(V)]
    assert lprobs[0].tolist() == pytest.approx(expected, abs=1e-12)


def test_ensemble_state_select_reorders_every_member():
    members = [TinyGRU(seed=5), TinyGRU(seed=6)]
    ensemble = Ensemble(members)
    src, lengths = random_batch(7, [3, 1, 4])
    state = ensemble.encode(src, lengths)
    index = torch.tensor([2, 0, 0])
    picked = state.select(index)
    assert isinstance(picked, EnsembleState) and len(picked.members) == 2
    for before, after in zip(state.members, picked.members):
        assert torch.equal(after.h, before.h[index])
    assert not torch.equal(picked.members[0].h, picked.members[1].h)
    prev = torch.tensor([A, B, C])
    lprobs_all, _ = ensemble.step(prev[index], state.select(index))
    lprobs_rows, _ = ensemble.step(prev, state)
    torch.testing.assert_close(lprobs_all, lprobs_rows[index], rtol=0, atol=1e-12)


def test_ensemble_rejects_unknown_combine():
    with pytest.raises(ValueError):
        Ensemble([TinyGRU(seed=0)], combine="max")  # type: ignore[arg-type]


def test_topk_is_deterministic_under_ties():
    # Search-level ties are covered above; this pins the helper on -inf ties too (step 1 of a
    # wide beam: only beam 0's candidates are finite).
    from s2s.decode.beam import _topk_stable

    x = torch.tensor([[1.0, 3.0, 3.0, -math.inf, 3.0, -math.inf, 2.0, -math.inf]])
    for k, expected in [(2, [1, 2]), (4, [1, 2, 4, 6]), (7, [1, 2, 4, 6, 0, 3, 5])]:
        values, index = _topk_stable(x, k)
        assert index[0].tolist() == expected
        assert values[0].tolist() == x[0, expected].tolist()


@pytest.mark.parametrize("path", ["window", "key"])
def test_the_stable_topk_is_exact_under_many_ties_by_either_path(path):
    """The CPU's top-2k window (with its exact path where ties pass the window) and CUDA's
    sync-free int64 keys, run here, against sorting every row by (-value, index): quantised
    values (bf16 logits tie often), -inf, -0.0 beside 0.0."""
    from s2s.decode.beam import _topk_by_key, _topk_stable

    topk = _topk_stable if path == "window" else _topk_by_key
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        n, width = (int(v) for v in torch.randint(1, 60, (2,), generator=g))
        k = int(torch.randint(1, width + 1, (1,), generator=g))
        x = torch.randint(-3, 4, (n, width), generator=g).float() / 2
        x[torch.rand(n, width, generator=g) < 0.2] = -math.inf
        x[torch.rand(n, width, generator=g) < 0.05] = -0.0
        values, index = topk(x, k)
        want = [sorted(range(width), key=lambda i, r=row: (-r[i], i))[:k] for row in x.tolist()]
        assert index.tolist() == want
        assert torch.equal(values, x.gather(1, index))


def test_an_empty_source_translates_to_an_empty_line_and_the_others_as_without_it():
    """The translate stage read an empty line as one <pad> and decoded whatever the model made of
    it, where `s2s translate-text` gave an empty line: both now give the empty line, and the other
    sentences' hypotheses are those of a run without it."""
    from s2s.config import TranslateConfig
    from s2s.data.vocab import SPECIALS, Vocab
    from s2s.decode.translate import translate

    words = (*SPECIALS, *[f"w{i}" for i in range(12)])
    vocab = Vocab(words=words, fingerprint="t")
    model = build_model(RNNConfig(num_layers=1, hidden_size=8, embed_size=6), src_vocab=len(words),
                        tgt_vocab=len(words), pad=vocab.pad)
    model.init_weights(3)
    model.eval()
    cfg = TranslateConfig(batch_size=2)
    sources = [[4, 5, 6], [], [7, 8], [], [9, 10, 11, 12]]
    got = translate(model, sources, cfg=cfg, beam=3, nbest=2, vocab=vocab,
                    device=torch.device("cpu"))
    assert got[1] == got[3] == [Hypothesis(tokens=(), score=0.0, finished=True)]
    alone = translate(model, [s for s in sources if s], cfg=cfg, beam=3, nbest=2, vocab=vocab,
                      device=torch.device("cpu"))
    assert [got[0], got[2], got[4]] == alone and all(len(h) == 2 for h in alone)
