"""Golden values of every architecture, guarding the redesign of issue 12.

The redesign must keep these numbers: for each architecture s2s.model.build_model supports
(seq2seq with lstm, peephole and gru cells; cho with gru; attention with gru and lstm cells and
each attention score, additive, dot and general), a tiny seeded model on a fixed tiny batch gives

1. the same teacher-forced log-probabilities (eval mode, fp32): the log-prob of each gold target
   token, and the sum of the whole (N, T, V) log-softmax over the non-pad positions;
2. the same losses and weights after two fp32 training steps done as s2s.train does them
   (shard_nll, SGD lr 0.7, gradient norm clipped at 5.0): per parameter name, the sum and the sum
   of absolute values;
3. the same beam search output (s2s.decode.beam.beam_search, beam 3, 3-best, min_len 0 and 3)
   on two source sentences of the model after those two steps: token ids, finished flags and
   scores.

The values below were computed once with the code at commit 49e2a93, on CPU with one thread
(torch.set_num_threads(1), set by the autouse fixture), and pasted in literally. Do not
regenerate them to make a failing test pass: a difference is a change of behaviour.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from s2s import precision
from s2s.data.batching import collate
from s2s.decode.beam import beam_search
from s2s.model import build_model
from s2s.train import shard_nll
from s2s.model.seq2seq import RNNConfig

CPU = torch.device("cpu")


class Specials:  # the vocabulary attributes shard_nll and collate use
    pad, bos, eos = 0, 1, 2


# name -> (arch, cell, attention score, reverse_source)
ARCHS = {
    "seq2seq/lstm": ("seq2seq", "lstm", "additive", True),
    "seq2seq/lstm/forward": ("seq2seq", "lstm", "additive", False),
    "seq2seq/peephole": ("seq2seq", "peephole", "additive", True),
    "seq2seq/gru": ("seq2seq", "gru", "additive", True),
    "cho/gru": ("cho", "gru", "additive", True),
    "attention/gru/additive": ("attention", "gru", "additive", True),
    "attention/gru/dot": ("attention", "gru", "dot", True),
    "attention/gru/general": ("attention", "gru", "general", True),
    "attention/lstm/additive": ("attention", "lstm", "additive", True),
    "attention/lstm/additive/forward": ("attention", "lstm", "additive", False),
    "attention/lstm/dot": ("attention", "lstm", "dot", True),
    "attention/lstm/general": ("attention", "lstm", "general", True),
}
NAMES = list(ARCHS)


# The golden values were computed at one intra-op thread (conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(name: str):
    arch, cell, attention, reverse = ARCHS[name]
    cfg = RNNConfig(arch=arch, cell=cell, attention=attention,
                      num_layers=2 if arch == "seq2seq" else 1, hidden_size=16, embed_size=12,
                      reverse_source=reverse, init_seed=3)
    model = build_model(cfg, src_vocab=30, tgt_vocab=31, pad=0)
    model.init_weights(3)
    return model


def tiny_pairs():
    g = torch.Generator().manual_seed(5)
    return [([int(x) for x in torch.randint(3, 30, (n,), generator=g)],
             [int(x) for x in torch.randint(3, 31, (m,), generator=g)])
            for n, m in [(5, 6), (3, 2), (7, 8), (1, 3)]]


def teacher_forced(model):
    """The log-prob of each gold target token (<eos> included), sentence after sentence, and
    the sum of all (N, T, V) log-probs at the non-pad positions."""
    model.eval()
    b = collate(tiny_pairs(), pad=Specials.pad, bos=Specials.bos, eos=Specials.eos)
    with torch.no_grad():
        lprobs = torch.log_softmax(model(b.src, b.src_lengths, b.tgt_in), -1)  # (N, T, V)
    real = b.tgt_out != Specials.pad  # (N, T)
    gold = lprobs.gather(2, b.tgt_out.unsqueeze(2))[..., 0][real]
    return [float(x) for x in gold], float(lprobs[real].double().sum())


def two_training_steps(model):
    """What s2s.train.main does per minibatch in fp32, twice: the two losses."""
    model.train()
    pairs = tiny_pairs()
    opt = torch.optim.SGD(model.parameters(), lr=0.7)
    losses = []
    for _ in range(2):
        nll, _ = shard_nll(model, pairs, vocab=Specials, device=CPU,
                           autocast=precision.autocast(CPU, None))
        loss = nll / len(pairs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # the norms here are 1.0-1.3: no clip
        opt.step()
        losses.append(loss.item())
    return losses


def weight_sums(model):
    """name -> (sum, sum of absolute values) of each parameter, in float64."""
    return {name: (float(p.detach().double().sum()), float(p.detach().double().abs().sum()))
            for name, p in model.named_parameters()}


def beam_outputs(model, min_len: int):
    """Beam 3, 3-best, of the first two sources: per sentence [(tokens, finished, score)]."""
    model.eval()
    b = collate(tiny_pairs()[:2], pad=Specials.pad, bos=Specials.bos, eos=Specials.eos)
    hyps = beam_search(model, b.src, b.src_lengths, beam=3, nbest=3, bos=Specials.bos,
                       eos=Specials.eos, max_len=8, min_len=min_len, pad=Specials.pad)
    return [[(list(h.tokens), h.finished, h.score) for h in hs] for hs in hyps]


@pytest.mark.parametrize("name", NAMES)
def test_teacher_forced_log_probs(name):
    gold, total = teacher_forced(tiny_model(name))
    want = GOLDEN[name]
    assert gold == pytest.approx(want["gold_logprobs"], rel=0, abs=1e-6)
    # The sum runs over every log-prob of the vocabulary, ~2,450 in all: the CPU's fp32 kernels
    # (AVX2 on AMD Zen 2, AVX-512 elsewhere) move it by up to 2.2e-5 (measured), 1e-8 of it.
    assert total == pytest.approx(want["logprob_sum"], rel=2e-8, abs=0)


@pytest.mark.parametrize("name", NAMES)
def test_weights_after_two_training_steps(name):
    model = tiny_model(name)
    losses = two_training_steps(model)
    want = GOLDEN[name]
    assert losses == pytest.approx(want["losses"], rel=1e-6, abs=1e-6)
    got = weight_sums(model)
    assert list(got) == list(want["weights"])  # the same parameters, in the same order
    for pname, (s, a) in got.items():
        ws, wa = want["weights"][pname]
        assert s == pytest.approx(ws, rel=1e-6, abs=1e-6), pname
        assert a == pytest.approx(wa, rel=1e-6, abs=1e-6), pname


# min_len 0: as translate searches (after two steps the best hypothesis is still the empty one);
# min_len 3: <eos> is banned for 3 steps, so longer hypotheses are searched and states reordered
@pytest.mark.parametrize("min_len", [0, 3])
@pytest.mark.parametrize("name", NAMES)
def test_beam_search_after_two_training_steps(name, min_len):
    model = tiny_model(name)
    two_training_steps(model)
    got = beam_outputs(model, min_len)
    want = GOLDEN[name][f"beam_min_len{min_len}"]
    assert [[(t, f) for t, f, _ in hs] for hs in got] == [[(t, f) for t, f, _ in hs]
                                                          for hs in want]
    assert [[s for *_, s in hs] for hs in got] == [pytest.approx([s for *_, s in hs], rel=0,
                                                                 abs=1e-5) for hs in want]


# The golden values, one dict per architecture: computed at commit 49e2a93 (CPU, fp32, one
# thread; two threads gave the same values bit for bit), pasted in literally.
GOLDEN: dict[str, dict] = {
    "seq2seq/lstm": {
        "gold_logprobs": [
            -3.4119386672973633, -3.441124200820923, -3.355764150619507, -3.460867404937744,
            -3.393230438232422, -3.5160157680511475, -3.4203426837921143, -3.3861136436462402,
            -3.3648860454559326, -3.4207236766815186, -3.3767733573913574, -3.441113233566284,
            -3.4886088371276855, -3.361440420150757, -3.3560147285461426, -3.471666097640991,
            -3.419100522994995, -3.493361473083496, -3.420379400253296, -3.5039546489715576,
            -3.3875036239624023, -3.436758518218994, -3.4204628467559814,
        ],
        "logprob_sum": -2449.24297952652,
        "losses": [19.687036514282227, 18.70064926147461],
        "weights": {
            "src_embed.weight": (-0.623683045290818, 13.939487542513234),
            "tgt_embed.weight": (-0.6228657326137181, 14.38007116332301),
            "proj.weight": (1.4393843542347895, 19.89547904135543),
            "proj.bias": (-0.05608019419014454, 6.885649232193828),
            "encoder.lstm.weight_ih_l0": (0.8769727569961105, 29.947116650662792),
            "encoder.lstm.weight_hh_l0": (0.19477406980104206, 40.74617513597377),
            "encoder.lstm.bias_ih_l0": (0.28992854832904413, 2.98093941132538),
            "encoder.lstm.bias_hh_l0": (-0.5700140275293961, 2.4913308628601953),
            "encoder.lstm.weight_ih_l1": (-2.373153977023321, 41.87904506704945),
            "encoder.lstm.weight_hh_l1": (-1.1819341094524134, 40.69035896434798),
            "encoder.lstm.bias_ih_l1": (-0.3326475149951875, 2.500141822732985),
            "encoder.lstm.bias_hh_l1": (0.05183010455220938, 2.8440258437767625),
            "decoder.lstm.weight_ih_l0": (-0.1730518799740821, 30.38020959869027),
            "decoder.lstm.weight_hh_l0": (-0.8745874592159453, 40.393012016592365),
            "decoder.lstm.bias_ih_l0": (-0.31015793802316693, 2.424702350610005),
            "decoder.lstm.bias_hh_l0": (0.5277358772291336, 2.65266357632936),
            "decoder.lstm.weight_ih_l1": (0.6367646803118987, 41.735309163006605),
            "decoder.lstm.weight_hh_l1": (0.5537839631724637, 40.30681558456854),
            "decoder.lstm.bias_ih_l1": (-0.23572347033768892, 2.5097923995926976),
            "decoder.lstm.bias_hh_l1": (0.29076149451429956, 2.7683455082878936),
        },
        "beam_min_len0": [
            [
                ([], True, -2.4110116958618164),
                ([20], True, -5.408269882202148),
                ([13], True, -5.43703031539917),
            ],
            [
                ([], True, -2.4112954139709473),
                ([20], True, -5.408535003662109),
                ([13], True, -5.437386989593506),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.410195350646973),
                ([13, 20, 20], True, -11.43904972076416),
                ([20, 13, 20], True, -11.444186210632324),
            ],
            [
                ([20, 20, 20], True, -11.410394668579102),
                ([13, 20, 20], True, -11.439342498779297),
                ([20, 13, 20], True, -11.44449234008789),
            ],
        ],
    },
    "seq2seq/lstm/forward": {
        "gold_logprobs": [
            -3.411924123764038, -3.4411275386810303, -3.3557612895965576, -3.460864543914795,
            -3.3932323455810547, -3.5160160064697266, -3.420342206954956, -3.386108636856079,
            -3.3648922443389893, -3.4207301139831543, -3.3767752647399902, -3.4411160945892334,
            -3.4886035919189453, -3.3614397048950195, -3.35601544380188, -3.4716670513153076,
            -3.419100284576416, -3.493361711502075, -3.420379400253296, -3.5039546489715576,
            -3.3875036239624023, -3.436758518218994, -3.4204628467559814,
        ],
        "logprob_sum": -2449.242992401123,
        "losses": [19.687034606933594, 18.700654983520508],
        "weights": {
            "src_embed.weight": (-0.6236841081044986, 13.939641798227967),
            "tgt_embed.weight": (-0.6228666062525008, 14.380071257444797),
            "proj.weight": (1.439384293364128, 19.895533823146252),
            "proj.bias": (-0.056080250069499016, 6.885652245953679),
            "encoder.lstm.weight_ih_l0": (0.8769022295382456, 29.947072445844242),
            "encoder.lstm.weight_hh_l0": (0.19477531793791059, 40.74617198630176),
            "encoder.lstm.bias_ih_l0": (0.2899475976009853, 2.980935465544462),
            "encoder.lstm.bias_hh_l0": (-0.5699949558475055, 2.491321236535441),
            "encoder.lstm.weight_ih_l1": (-2.373147292615613, 41.87905313397641),
            "encoder.lstm.weight_hh_l1": (-1.1819275129873859, 40.69035610872925),
            "encoder.lstm.bias_ih_l1": (-0.3326476477086544, 2.5001318156719208),
            "encoder.lstm.bias_hh_l1": (0.05182995228096843, 2.8440318307839334),
            "decoder.lstm.weight_ih_l0": (-0.17305270556244068, 30.380209594062762),
            "decoder.lstm.weight_hh_l0": (-0.8745894083481289, 40.393009160332895),
            "decoder.lstm.bias_ih_l0": (-0.31015493795803195, 2.424698313051522),
            "decoder.lstm.bias_hh_l0": (0.5277388889226131, 2.6526578503544442),
            "decoder.lstm.weight_ih_l1": (0.6368224559992086, 41.73551358413533),
            "decoder.lstm.weight_hh_l1": (0.5537847505765967, 40.306820548081305),
            "decoder.lstm.bias_ih_l1": (-0.2357231737114489, 2.5097889215685427),
            "decoder.lstm.bias_hh_l1": (0.2907617558375932, 2.7683270414709114),
        },
        "beam_min_len0": [
            [
                ([], True, -2.4110145568847656),
                ([20], True, -5.408271789550781),
                ([13], True, -5.437033653259277),
            ],
            [
                ([], True, -2.41131591796875),
                ([20], True, -5.408562660217285),
                ([13], True, -5.437411308288574),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.410194396972656),
                ([13, 20, 20], True, -11.43905258178711),
                ([20, 13, 20], True, -11.444189071655273),
            ],
            [
                ([20, 20, 20], True, -11.410419464111328),
                ([13, 20, 20], True, -11.439363479614258),
                ([20, 13, 20], True, -11.444512367248535),
            ],
        ],
    },
    "seq2seq/peephole": {
        "gold_logprobs": [
            -3.41058087348938, -3.4336097240448, -3.354919910430908, -3.4621520042419434,
            -3.3866372108459473, -3.514136791229248, -3.422816753387451, -3.385922431945801,
            -3.376960039138794, -3.4228551387786865, -3.3831775188446045, -3.433589220046997,
            -3.48797607421875, -3.3715953826904297, -3.3552188873291016, -3.4663145542144775,
            -3.424753189086914, -3.4858288764953613, -3.4228155612945557, -3.5024144649505615,
            -3.3835842609405518, -3.4320731163024902, -3.4228675365448,
        ],
        "logprob_sum": -2449.2121489048004,
        "losses": [19.685699462890625, 18.71529197692871],
        "weights": {
            "src_embed.weight": (-0.6225963160031824, 13.940393169839808),
            "tgt_embed.weight": (-0.6242654387897346, 14.379479458992137),
            "proj.weight": (1.4393843316938728, 19.577516456629382),
            "proj.bias": (-0.05608018487691879, 6.8933108523488045),
            "encoder.cells.0.weight_ih": (0.8770362961004139, 29.947821919187845),
            "encoder.cells.0.weight_hh": (0.19474044097523802, 40.7461559225826),
            "encoder.cells.0.bias": (0.2910306242702063, 2.9791394030617084),
            "encoder.cells.0.peephole": (-0.4827015470364131, 1.8498835126520135),
            "encoder.cells.1.weight_ih": (-2.708805094123818, 41.92611295875395),
            "encoder.cells.1.weight_hh": (-1.0775198968804034, 40.52245151864554),
            "encoder.cells.1.bias": (-0.04630657407687977, 2.664046244113706),
            "encoder.cells.1.peephole": (0.15713134105317295, 1.972917977022007),
            "decoder.cells.0.weight_ih": (-0.3929597408277914, 30.82480379822664),
            "decoder.cells.0.weight_hh": (-1.2146097388912267, 40.22994196235152),
            "decoder.cells.0.bias": (-0.12266522519530554, 2.3639653752161394),
            "decoder.cells.0.peephole": (0.22572661429876462, 1.7298630130826496),
            "decoder.cells.1.weight_ih": (0.7293481978376803, 42.04355832915098),
            "decoder.cells.1.weight_hh": (0.6681877296214225, 40.24019244288502),
            "decoder.cells.1.bias": (0.1178207325283438, 2.7318656572606415),
            "decoder.cells.1.peephole": (-0.11355059407651424, 1.756967794150114),
        },
        "beam_min_len0": [
            [
                ([], True, -2.4241437911987305),
                ([20], True, -5.431604385375977),
                ([13], True, -5.4581122398376465),
            ],
            [
                ([], True, -2.4241597652435303),
                ([20], True, -5.431769847869873),
                ([13], True, -5.457895278930664),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.449517250061035),
                ([20, 20, 13], True, -11.475923538208008),
                ([13, 20, 20], True, -11.476072311401367),
            ],
            [
                ([20, 20, 20], True, -11.449793815612793),
                ([13, 20, 20], True, -11.47596549987793),
                ([20, 20, 13], True, -11.476091384887695),
            ],
        ],
    },
    "seq2seq/gru": {
        "gold_logprobs": [
            -3.413060426712036, -3.458876132965088, -3.3502440452575684, -3.4558253288269043,
            -3.382556676864624, -3.527315855026245, -3.4354500770568848, -3.3856143951416016,
            -3.380305290222168, -3.4345908164978027, -3.381117343902588, -3.458794593811035,
            -3.497009038925171, -3.3845107555389404, -3.3482048511505127, -3.4578564167022705,
            -3.4210891723632812, -3.479353904724121, -3.435441255569458, -3.499399423599243,
            -3.3800413608551025, -3.446012020111084, -3.4350132942199707,
        ],
        "logprob_sum": -2449.2763385772705,
        "losses": [19.711917877197266, 18.68813705444336],
        "weights": {
            "src_embed.weight": (-0.6227533181299805, 13.940438005804026),
            "tgt_embed.weight": (-0.6218794760643505, 14.377717862895224),
            "proj.weight": (1.4393842811696231, 19.770886867510853),
            "proj.bias": (-0.0560802910476923, 6.890750488266349),
            "encoder.gru.weight_ih_l0": (0.9806623642143677, 22.226115924255282),
            "encoder.gru.weight_hh_l0": (0.1162210437032627, 31.185266974862316),
            "encoder.gru.bias_ih_l0": (0.7443511516903527, 1.8029440147220157),
            "encoder.gru.bias_hh_l0": (0.07338735240045935, 1.717256385483779),
            "encoder.gru.weight_ih_l1": (-1.2988621956906172, 30.615361012628),
            "encoder.gru.weight_hh_l1": (-2.4406554943852825, 31.363972118895617),
            "encoder.gru.bias_ih_l1": (-0.6656138049438596, 1.9168665884062648),
            "encoder.gru.bias_hh_l1": (0.3528562432038598, 1.6635427746805362),
            "decoder.gru.weight_ih_l0": (-0.5428394650516566, 23.570395230985014),
            "decoder.gru.weight_hh_l0": (-0.6106596097670263, 29.98429433669662),
            "decoder.gru.bias_ih_l0": (0.18886312749236822, 1.9233845248818398),
            "decoder.gru.bias_hh_l0": (-0.09498820966109633, 2.0820841533131897),
            "decoder.gru.weight_ih_l1": (-1.568050277113798, 30.81750392363756),
            "decoder.gru.weight_hh_l1": (1.155697504336672, 30.39576611613859),
            "decoder.gru.bias_ih_l1": (0.03998394450172782, 2.134393114130944),
            "decoder.gru.bias_hh_l1": (-0.04378679534420371, 2.0980462855659425),
        },
        "beam_min_len0": [
            [
                ([], True, -2.3967678546905518),
                ([20], True, -5.37152099609375),
                ([13], True, -5.406739234924316),
            ],
            [
                ([], True, -2.3964171409606934),
                ([20], True, -5.370638370513916),
                ([13], True, -5.4062042236328125),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.31224250793457),
                ([13, 20, 20], True, -11.347238540649414),
                ([20, 13, 20], True, -11.361512184143066),
            ],
            [
                ([20, 20, 20], True, -11.31087875366211),
                ([13, 20, 20], True, -11.346221923828125),
                ([20, 13, 20], True, -11.360315322875977),
            ],
        ],
    },
    "cho/gru": {
        "gold_logprobs": [
            -3.40958309173584, -3.4460394382476807, -3.3412983417510986, -3.465254068374634,
            -3.375974416732788, -3.516324281692505, -3.4309866428375244, -3.3782966136932373,
            -3.3738327026367188, -3.4319469928741455, -3.375147819519043, -3.44356632232666,
            -3.480436325073242, -3.3794896602630615, -3.33996844291687, -3.481273651123047,
            -3.418203353881836, -3.4820289611816406, -3.435971260070801, -3.5228450298309326,
            -3.375501871109009, -3.442923069000244, -3.4307949542999268,
        ],
        "logprob_sum": -2449.310238599777,
        "losses": [19.69442367553711, 18.674766540527344],
        "weights": {
            "src_embed.weight": (-0.624720275249274, 13.943135117726342),
            "tgt_embed.weight": (-0.6840251722933317, 14.392484248299297),
            "proj.weight": (1.4393842673161998, 20.2194163762033),
            "proj.bias": (-0.05608034133911133, 6.870468825101852),
            "encoder.gru.weight_ih_l0": (0.9836095036953338, 22.227302235922252),
            "encoder.gru.weight_hh_l0": (0.11494894313364057, 31.190968665971013),
            "encoder.gru.bias_ih_l0": (0.7768375859450316, 1.8129199405520922),
            "encoder.gru.bias_hh_l0": (0.09004553267732263, 1.7365982313640416),
            "decoder.gru.weight_ih_l0": (-3.740999880401432, 54.284372201394945),
            "decoder.gru.weight_hh_l0": (-1.3044044106136425, 30.741482130360964),
            "decoder.gru.bias_ih_l0": (0.15528777381405234, 2.1051351712085307),
            "decoder.gru.bias_hh_l0": (0.35489854181651026, 2.063263303018175),
            "init_proj.weight": (-0.07392266852912144, 9.8717816759563),
            "init_proj.bias": (0.18277612002566457, 0.6983463610522449),
            "out_proj.weight": (-1.16941612836672, 28.04106609156588),
            "out_proj.bias": (0.5287857960211113, 1.2283399786101654),
        },
        "beam_min_len0": [
            [
                ([], True, -2.3543641567230225),
                ([20], True, -5.316285133361816),
                ([13], True, -5.364461898803711),
            ],
            [
                ([], True, -2.355259656906128),
                ([20], True, -5.317530632019043),
                ([13], True, -5.365481853485107),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.241281509399414),
                ([13, 20, 20], True, -11.287420272827148),
                ([20, 13, 20], True, -11.289386749267578),
            ],
            [
                ([20, 20, 20], True, -11.243178367614746),
                ([13, 20, 20], True, -11.289093017578125),
                ([20, 13, 20], True, -11.291115760803223),
            ],
        ],
    },
    "attention/gru/additive": {
        "gold_logprobs": [
            -3.4073493480682373, -3.443601131439209, -3.357492685317993, -3.4571373462677,
            -3.3949456214904785, -3.5183441638946533, -3.4213640689849854, -3.384747266769409,
            -3.3740127086639404, -3.4213061332702637, -3.3761847019195557, -3.44313907623291,
            -3.5009119510650635, -3.37394118309021, -3.358187198638916, -3.4695935249328613,
            -3.4223575592041016, -3.489964246749878, -3.4216976165771484, -3.502842903137207,
            -3.384713888168335, -3.429081678390503, -3.4204704761505127,
        ],
        "logprob_sum": -2449.2490606307983,
        "losses": [19.69334602355957, 18.6887264251709],
        "weights": {
            "src_embed.weight": (-0.6291227335241274, 13.943761265029025),
            "tgt_embed.weight": (-0.6347061269916594, 14.385499752126634),
            "proj.weight": (1.4393842843201128, 19.98638718305301),
            "proj.bias": (-0.056080203503370285, 6.887753713876009),
            "encoder.weight_ih_l0": (0.9809066329689813, 22.228406822767283),
            "encoder.weight_hh_l0": (0.11658424083725549, 31.185077238740632),
            "encoder.bias_ih_l0": (0.7080211270658765, 1.777909501135582),
            "encoder.bias_hh_l0": (0.05435779946856201, 1.723399228649214),
            "encoder.weight_ih_l0_reverse": (-1.483648537614954, 22.957251121355966),
            "encoder.weight_hh_l0_reverse": (-2.2491691925242776, 31.330647621580283),
            "encoder.bias_ih_l0_reverse": (-0.14552555116824806, 2.1616894674953073),
            "encoder.bias_hh_l0_reverse": (0.11864907573908567, 1.8886946067214012),
            "decoder.gru.weight_ih_l0": (-2.563041274970601, 84.24042139748417),
            "decoder.gru.weight_hh_l0": (-0.4872908033104295, 30.56387744956362),
            "decoder.gru.bias_ih_l0": (0.08112223469652236, 1.79345887969248),
            "decoder.gru.bias_hh_l0": (0.39451511928928085, 1.7353268462757114),
            "key_proj.weight": (-0.2694933312289436, 20.80729433012158),
            "key_proj.bias": (0.09163283579982817, 0.7897712362464517),
            "query_proj.weight": (0.07097072948818095, 10.27058538570418),
            "v.weight": (0.05503881396725774, 0.6672446583397686),
            "init_proj.weight": (1.4572715683098068, 20.483898414582654),
            "init_proj.bias": (0.13424192904494703, 0.671513203298673),
            "out_proj.weight": (0.1529345072904107, 30.227617570881193),
            "out_proj.bias": (0.013939434196799994, 1.053523559588939),
        },
        "beam_min_len0": [
            [
                ([], True, -2.3599634170532227),
                ([20], True, -5.353341579437256),
                ([13], True, -5.387975215911865),
            ],
            [
                ([], True, -2.360140323638916),
                ([20], True, -5.35361909866333),
                ([13], True, -5.388017177581787),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.338540077209473),
                ([13, 20, 20], True, -11.373306274414062),
                ([20, 13, 20], True, -11.374871253967285),
            ],
            [
                ([20, 20, 20], True, -11.33907699584961),
                ([13, 20, 20], True, -11.37360668182373),
                ([20, 13, 20], True, -11.375163078308105),
            ],
        ],
    },
    "attention/gru/dot": {
        "gold_logprobs": [
            -3.4153146743774414, -3.4477906227111816, -3.3528668880462646, -3.4740896224975586,
            -3.3791937828063965, -3.5012428760528564, -3.4337451457977295, -3.374051332473755,
            -3.359351873397827, -3.4337520599365234, -3.3808376789093018, -3.4480018615722656,
            -3.4898087978363037, -3.380115270614624, -3.352369546890259, -3.4673967361450195,
            -3.394473075866699, -3.4908945560455322, -3.4339003562927246, -3.5101521015167236,
            -3.3741300106048584, -3.4362900257110596, -3.43375825881958,
        ],
        "logprob_sum": -2449.2504618167877,
        "losses": [19.690881729125977, 18.667387008666992],
        "weights": {
            "src_embed.weight": (-0.6239240445938776, 13.941365705097269),
            "tgt_embed.weight": (-0.616455020965077, 14.37939870764967),
            "proj.weight": (1.4393842990830308, 20.347616938481224),
            "proj.bias": (-0.056080128997564316, 6.8572886027395725),
            "encoder.weight_ih_l0": (0.9780628074731794, 22.229046216038114),
            "encoder.weight_hh_l0": (0.11563145973195788, 31.185679618254653),
            "encoder.bias_ih_l0": (0.7775679924016003, 1.8418330094500561),
            "encoder.bias_hh_l0": (0.09086179442238063, 1.723035688395612),
            "encoder.weight_ih_l0_reverse": (-1.4850455511977998, 22.95592095306256),
            "encoder.weight_hh_l0_reverse": (-2.249531980967731, 31.330048747666297),
            "encoder.bias_ih_l0_reverse": (-0.13145704078488052, 2.2335239814128727),
            "encoder.bias_hh_l0_reverse": (0.12543561542406678, 1.9021740891039371),
            "decoder.gru.weight_ih_l0": (-2.560262148097536, 84.22103971855176),
            "decoder.gru.weight_hh_l0": (-0.48744822931530507, 30.56577557320179),
            "decoder.gru.bias_ih_l0": (0.0699394570547156, 1.8442110054311343),
            "decoder.gru.bias_hh_l0": (0.38978204067097977, 1.7555690950830467),
            "key_proj.weight": (-0.2694941605026031, 20.807298808899162),
            "init_proj.weight": (0.676205812007538, 20.503837426324026),
            "init_proj.bias": (0.0930148298793938, 0.7148982482904103),
            "out_proj.weight": (0.9454204617068172, 30.46896298014326),
            "out_proj.bias": (0.6022845776751637, 1.2854841807857156),
        },
        "beam_min_len0": [
            [
                ([], True, -2.3410940170288086),
                ([20], True, -5.317816257476807),
                ([13], True, -5.343512535095215),
            ],
            [
                ([], True, -2.341672658920288),
                ([20], True, -5.318779945373535),
                ([13], True, -5.34431266784668),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.27110767364502),
                ([13, 20, 20], True, -11.296350479125977),
                ([20, 13, 20], True, -11.297164916992188),
            ],
            [
                ([20, 20, 20], True, -11.272785186767578),
                ([13, 20, 20], True, -11.297863960266113),
                ([20, 13, 20], True, -11.298678398132324),
            ],
        ],
    },
    "attention/gru/general": {
        "gold_logprobs": [
            -3.4139881134033203, -3.4266769886016846, -3.356618642807007, -3.4612839221954346,
            -3.392944812774658, -3.520883321762085, -3.4223415851593018, -3.392570734024048,
            -3.3698012828826904, -3.422624111175537, -3.383547782897949, -3.426814556121826,
            -3.4783191680908203, -3.3718209266662598, -3.3570668697357178, -3.461474657058716,
            -3.4237380027770996, -3.498889684677124, -3.422016143798828, -3.5022988319396973,
            -3.3927066326141357, -3.4389500617980957, -3.422532796859741,
        ],
        "logprob_sum": -2449.171065568924,
        "losses": [19.689977645874023, 18.677291870117188],
        "weights": {
            "src_embed.weight": (-0.6347999282806995, 13.93524049390544),
            "tgt_embed.weight": (-0.6193541282555088, 14.375144202727824),
            "proj.weight": (1.4393843188881874, 20.22033143020235),
            "proj.bias": (-0.05608007684350014, 6.874797310680151),
            "encoder.weight_ih_l0": (0.9828666225075722, 22.220325996284373),
            "encoder.weight_hh_l0": (0.11610311560798436, 31.18609121031477),
            "encoder.bias_ih_l0": (0.7342872299486771, 1.8051774997729808),
            "encoder.bias_hh_l0": (0.06801901978906244, 1.7447178800357506),
            "encoder.weight_ih_l0_reverse": (-1.4883703570731086, 22.957941118183044),
            "encoder.weight_hh_l0_reverse": (-2.2530646065279143, 31.33254510462575),
            "encoder.bias_ih_l0_reverse": (-0.1942514821421355, 2.184058984508738),
            "encoder.bias_hh_l0_reverse": (0.09705065132584423, 1.9507419200381264),
            "decoder.gru.weight_ih_l0": (-2.5591282754571694, 84.21690454664667),
            "decoder.gru.weight_hh_l0": (-0.4868930637453559, 30.567431612115342),
            "decoder.gru.bias_ih_l0": (0.11158577376045287, 1.9237948635127395),
            "decoder.gru.bias_hh_l0": (0.41071159587590955, 1.737315842503449),
            "key_proj.weight": (-0.2694938276794687, 20.807295877977083),
            "bilinear.weight": (0.4065683144435752, 10.420845692307921),
            "init_proj.weight": (0.8417723513666715, 20.572691370780376),
            "init_proj.bias": (0.17123837489634752, 0.5537373153492808),
            "out_proj.weight": (0.6044429381363443, 30.522528868394147),
            "out_proj.bias": (0.2525329194031656, 1.2746972716413438),
        },
        "beam_min_len0": [
            [
                ([], True, -2.3434956073760986),
                ([20], True, -5.326356410980225),
                ([11], True, -5.374990463256836),
            ],
            [
                ([], True, -2.3445146083831787),
                ([20], True, -5.327730178833008),
                ([11], True, -5.375965118408203),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.292099952697754),
                ([11, 20, 20], True, -11.340511322021484),
                ([20, 11, 20], True, -11.341169357299805),
            ],
            [
                ([20, 20, 20], True, -11.294227600097656),
                ([11, 20, 20], True, -11.342238426208496),
                ([20, 11, 20], True, -11.342947006225586),
            ],
        ],
    },
    "attention/lstm/additive": {
        "gold_logprobs": [
            -3.3970460891723633, -3.4538228511810303, -3.3344836235046387, -3.453254461288452,
            -3.389535903930664, -3.5074968338012695, -3.4308688640594482, -3.378967046737671,
            -3.3756356239318848, -3.430570363998413, -3.3746743202209473, -3.4536821842193604,
            -3.5072128772735596, -3.375133514404297, -3.3344669342041016, -3.46474552154541,
            -3.4098548889160156, -3.476814031600952, -3.43082332611084, -3.510434627532959,
            -3.378880023956299, -3.447601556777954, -3.4303171634674072,
        ],
        "logprob_sum": -2449.305727005005,
        "losses": [19.686580657958984, 18.66912841796875],
        "weights": {
            "src_embed.weight": (-0.6189398164206068, 13.93967210198025),
            "tgt_embed.weight": (-0.6166541746933945, 14.375684425409418),
            "proj.weight": (1.4393842990975827, 20.239451175904833),
            "proj.bias": (-0.056080399081110954, 6.858327509835362),
            "encoder.weight_ih_l0": (0.8781629842669645, 29.949007837920362),
            "encoder.weight_hh_l0": (0.19472628299627104, 40.74272854861556),
            "encoder.bias_ih_l0": (0.2813413437688723, 2.973681262577884),
            "encoder.bias_hh_l0": (-0.5786012122989632, 2.5345783082884736),
            "encoder.weight_ih_l0_reverse": (-2.4971192448429065, 30.84309181581193),
            "encoder.weight_hh_l0_reverse": (-0.9135284038711688, 41.599211397020554),
            "encoder.bias_ih_l0_reverse": (-0.017889947645016946, 2.1164266007690458),
            "encoder.bias_hh_l0_reverse": (-0.2753650668892078, 2.6877723524230532),
            "decoder.lstm.weight_ih_l0": (-1.5946757635938411, 112.82204399365219),
            "decoder.lstm.weight_hh_l0": (1.6232230071545928, 40.52355084333249),
            "decoder.lstm.bias_ih_l0": (0.32323615401401184, 2.851056143263122),
            "decoder.lstm.bias_hh_l0": (0.023749311920255423, 2.7300444249995053),
            "key_proj.weight": (0.13571607191988733, 19.40443051409966),
            "key_proj.bias": (0.10942481539677829, 0.545803428045474),
            "query_proj.weight": (-0.26426643997547217, 9.908906875556568),
            "v.weight": (0.009233688935637474, 0.7289107535034418),
            "init_proj.weight": (1.2246472171973437, 20.63663942849962),
            "init_proj.bias": (0.11161448154598475, 0.6651315009221435),
            "out_proj.weight": (-1.630307222581905, 30.716510800903052),
            "out_proj.bias": (0.5042559849098325, 1.5299186827614903),
        },
        "beam_min_len0": [
            [
                ([], True, -2.3438351154327393),
                ([20], True, -5.298372268676758),
                ([13], True, -5.353768825531006),
            ],
            [
                ([], True, -2.3443427085876465),
                ([20], True, -5.299337387084961),
                ([13], True, -5.354517936706543),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.207904815673828),
                ([20, 20, 13], True, -11.262971878051758),
                ([20, 13, 20], True, -11.263059616088867),
            ],
            [
                ([20, 20, 20], True, -11.209800720214844),
                ([20, 20, 13], True, -11.264650344848633),
                ([20, 13, 20], True, -11.264739990234375),
            ],
        ],
    },
    "attention/lstm/additive/forward": {
        "gold_logprobs": [
            -3.3970444202423096, -3.453831911087036, -3.3344695568084717, -3.453281879425049,
            -3.389569044113159, -3.50749135017395, -3.4308462142944336, -3.3789620399475098,
            -3.3755524158477783, -3.4305837154388428, -3.3746755123138428, -3.4536819458007812,
            -3.507214069366455, -3.3751299381256104, -3.334465503692627, -3.4647443294525146,
            -3.4098567962646484, -3.4768059253692627, -3.430823564529419, -3.510434627532959,
            -3.378880023956299, -3.447601556777954, -3.4303171634674072,
        ],
        "logprob_sum": -2449.305778980255,
        "losses": [19.68656349182129, 18.669109344482422],
        "weights": {
            "src_embed.weight": (-0.6189383539822302, 13.939626195257006),
            "tgt_embed.weight": (-0.6166529469483066, 14.375682877114741),
            "proj.weight": (1.4393842747958843, 20.239970027498202),
            "proj.bias": (-0.05608016438782215, 6.858324198052287),
            "encoder.weight_ih_l0": (0.8777548742727959, 29.9491360690663),
            "encoder.weight_hh_l0": (0.19471332858938695, 40.742694880606905),
            "encoder.bias_ih_l0": (0.28133931261254475, 2.9737483290373348),
            "encoder.bias_hh_l0": (-0.5786032300093211, 2.534588784968946),
            "encoder.weight_ih_l0_reverse": (-2.4981168803788023, 30.843639045240707),
            "encoder.weight_hh_l0_reverse": (-0.9134216753518558, 41.599232645086886),
            "encoder.bias_ih_l0_reverse": (-0.017853510324130184, 2.116486103457646),
            "encoder.bias_hh_l0_reverse": (-0.27532863296801224, 2.6877783383824863),
            "decoder.lstm.weight_ih_l0": (-1.5946628304882324, 112.82208221792098),
            "decoder.lstm.weight_hh_l0": (1.6232189540096442, 40.52356514218991),
            "decoder.lstm.bias_ih_l0": (0.32323431107215583, 2.851052379934117),
            "decoder.lstm.bias_hh_l0": (0.023747450206428766, 2.730040931608528),
            "key_proj.weight": (0.13571608133497648, 19.40443135346868),
            "key_proj.bias": (0.10942481562960893, 0.5458034282783046),
            "query_proj.weight": (-0.26426643997547217, 9.908906875556568),
            "v.weight": (0.009233685210347176, 0.728911517187953),
            "init_proj.weight": (1.2246482925183955, 20.636651711211016),
            "init_proj.bias": (0.11161450482904911, 0.665131876245141),
            "out_proj.weight": (-1.6308278865799366, 30.71685438919303),
            "out_proj.bias": (0.5042719366028905, 1.5299896197393537),
        },
        "beam_min_len0": [
            [
                ([], True, -2.3437931537628174),
                ([20], True, -5.2982988357543945),
                ([13], True, -5.353720664978027),
            ],
            [
                ([], True, -2.344357967376709),
                ([20], True, -5.299323081970215),
                ([13], True, -5.354541301727295),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.207765579223633),
                ([20, 20, 13], True, -11.262857437133789),
                ([20, 13, 20], True, -11.262945175170898),
            ],
            [
                ([20, 20, 20], True, -11.209732055664062),
                ([20, 20, 13], True, -11.264616012573242),
                ([20, 13, 20], True, -11.264705657958984),
            ],
        ],
    },
    "attention/lstm/dot": {
        "gold_logprobs": [
            -3.4193828105926514, -3.436732053756714, -3.3630754947662354, -3.470982074737549,
            -3.3873507976531982, -3.503222703933716, -3.420121431350708, -3.3742427825927734,
            -3.370327949523926, -3.4203455448150635, -3.3843111991882324, -3.4366283416748047,
            -3.489112615585327, -3.376011848449707, -3.3631160259246826, -3.483031749725342,
            -3.4198684692382812, -3.497800350189209, -3.4199581146240234, -3.5099732875823975,
            -3.3741371631622314, -3.4277994632720947, -3.420912027359009,
        ],
        "logprob_sum": -2449.2106654644012,
        "losses": [19.692113876342773, 18.677433013916016],
        "weights": {
            "src_embed.weight": (-0.6268926034317701, 13.938616950494179),
            "tgt_embed.weight": (-0.6226671300792077, 14.380621953056107),
            "proj.weight": (1.4393842689751182, 20.234954872139497),
            "proj.bias": (-0.05608032085001469, 6.88209836743772),
            "encoder.weight_ih_l0": (0.8783524890786794, 29.94585849529176),
            "encoder.weight_hh_l0": (0.19450932791551168, 40.74736572715301),
            "encoder.bias_ih_l0": (0.26779542936128564, 2.9707564231648576),
            "encoder.bias_hh_l0": (-0.5921471903275233, 2.4923291405139025),
            "encoder.weight_ih_l0_reverse": (-2.4942823135934304, 30.84400734686642),
            "encoder.weight_hh_l0_reverse": (-0.9136259763035923, 41.603407691727625),
            "encoder.bias_ih_l0_reverse": (-0.04807660907681566, 2.067344595256145),
            "encoder.bias_hh_l0_reverse": (-0.3055517353932373, 2.696275430440437),
            "decoder.lstm.weight_ih_l0": (-1.591855025110931, 112.82758688622823),
            "decoder.lstm.weight_hh_l0": (1.6215604792596423, 40.517988475643506),
            "decoder.lstm.bias_ih_l0": (0.3195723555254517, 2.849922109322506),
            "decoder.lstm.bias_hh_l0": (0.020085512252990156, 2.7714682812220417),
            "key_proj.weight": (0.13571623183088377, 19.404433654563036),
            "init_proj.weight": (0.8148599854757776, 20.715814799114014),
            "init_proj.bias": (0.1881350216572173, 0.6067413470591418),
            "out_proj.weight": (-0.9292969429807272, 30.524411152146058),
            "out_proj.bias": (0.7306194005068392, 1.176366545027122),
        },
        "beam_min_len0": [
            [
                ([], True, -2.340049982070923),
                ([20], True, -5.335370063781738),
                ([13], True, -5.3480706214904785),
            ],
            [
                ([], True, -2.340467691421509),
                ([20], True, -5.335530757904053),
                ([13], True, -5.348465919494629),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.325565338134766),
                ([13, 20, 20], True, -11.337987899780273),
                ([20, 13, 20], True, -11.338262557983398),
            ],
            [
                ([20, 20, 20], True, -11.325227737426758),
                ([13, 20, 20], True, -11.337883949279785),
                ([20, 13, 20], True, -11.338157653808594),
            ],
        ],
    },
    "attention/lstm/general": {
        "gold_logprobs": [
            -3.4080286026000977, -3.440542459487915, -3.35190749168396, -3.454343557357788,
            -3.3899927139282227, -3.4906134605407715, -3.416804790496826, -3.3850579261779785,
            -3.3832361698150635, -3.416849374771118, -3.395636558532715, -3.4407002925872803,
            -3.487333297729492, -3.3782851696014404, -3.35197114944458, -3.483107805252075,
            -3.406369686126709, -3.4795961380004883, -3.4171266555786133, -3.5054585933685303,
            -3.385500431060791, -3.4381895065307617, -3.41675066947937,
        ],
        "logprob_sum": -2449.158843278885,
        "losses": [19.680849075317383, 18.65643882751465],
        "weights": {
            "src_embed.weight": (-0.6165714999879128, 13.936097587131371),
            "tgt_embed.weight": (-0.6267616369586904, 14.381830299127614),
            "proj.weight": (1.4393842603658413, 20.661162505124594),
            "proj.bias": (-0.05608045682311058, 6.857810441404581),
            "encoder.weight_ih_l0": (0.8759518553924863, 29.948258261698356),
            "encoder.weight_hh_l0": (0.19451427031162893, 40.74448595647118),
            "encoder.bias_ih_l0": (0.2804573329340201, 2.971535345277516),
            "encoder.bias_hh_l0": (-0.5794852469698526, 2.4735146249295212),
            "encoder.weight_ih_l0_reverse": (-2.496378232142888, 30.83979038905818),
            "encoder.weight_hh_l0_reverse": (-0.9130169581767404, 41.60037050351093),
            "encoder.bias_ih_l0_reverse": (0.019675938732689247, 2.122212893998949),
            "encoder.bias_hh_l0_reverse": (-0.23779918503714725, 2.6693920448306017),
            "decoder.lstm.weight_ih_l0": (-1.6014061485111597, 112.82616477271222),
            "decoder.lstm.weight_hh_l0": (1.6249750677525299, 40.52301659755176),
            "decoder.lstm.bias_ih_l0": (0.30263695448229555, 2.825859151329496),
            "decoder.lstm.bias_hh_l0": (0.0031501277117058635, 2.755368424928747),
            "key_proj.weight": (0.13571611462975852, 19.404432258248562),
            "bilinear.weight": (-0.2610027181508485, 9.901340659096604),
            "init_proj.weight": (1.2627501837851014, 20.582757245283574),
            "init_proj.bias": (0.1680472061270848, 0.5998022329295054),
            "out_proj.weight": (-1.8540416532559902, 30.76720511077292),
            "out_proj.bias": (0.7945958944037557, 1.4262645477429032),
        },
        "beam_min_len0": [
            [
                ([], True, -2.310499429702759),
                ([20], True, -5.284145832061768),
                ([13], True, -5.324536323547363),
            ],
            [
                ([], True, -2.311152935028076),
                ([20], True, -5.285083770751953),
                ([13], True, -5.325356960296631),
            ],
        ],
        "beam_min_len3": [
            [
                ([20, 20, 20], True, -11.231467247009277),
                ([20, 20, 13], True, -11.271553039550781),
                ([20, 13, 20], True, -11.271678924560547),
            ],
            [
                ([20, 20, 20], True, -11.232962608337402),
                ([20, 20, 13], True, -11.272937774658203),
                ([20, 13, 20], True, -11.273063659667969),
            ],
        ],
    },
}
