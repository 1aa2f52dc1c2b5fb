"""The attention stage: which test sentences it draws and the weights it records."""

import torch

from s2s.analysis.alignments import pick_examples, weights_for
from s2s.data.vocab import Vocab
from s2s.model import build_model
from s2s.model.seq2seq import RNNConfig


def test_examples_are_spread_over_the_sentences_that_fit():
    sources = [["w"] * n for n in [3, 9, 10, 20, 8, 14, 15, 11, 12, 9]]
    hyps = [["h"]] * 10
    hyps[7] = []  # an empty translation has nothing to draw
    # fit: 1, 2, 4, 5, 8, 9 (8-14 source words, non-empty hypothesis)
    assert pick_examples(sources, hyps, 3) == [1, 4, 8]
    assert pick_examples(sources, hyps, 10) == [1, 2, 4, 5, 8, 9]


def test_weights_are_one_distribution_per_target_word_over_the_source():
    src_vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "a", "dog", "runs", "."), "s" * 64)
    tgt_vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "un", "chien", "court"), "t" * 64)
    cfg = RNNConfig(arch="attention", cell="gru", num_layers=1, hidden_size=8, embed_size=6,
                      init_range=1.0)
    model = build_model(cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab), pad=0)
    model.init_weights(4)
    model.eval()
    source, target = ["a", "dog", "runs", "."], ["un", "chien", "court", "vite"]  # vite: <unk>
    weights = torch.tensor(weights_for(model, src_vocab, tgt_vocab, source, target))
    assert weights.shape == (5, 4)  # 4 words and <eos>, over 4 source words
    torch.testing.assert_close(weights.sum(1), torch.ones(5), atol=5e-5, rtol=0)
    # the rows are the model's own: teacher forcing on <bos> + target gives the same weights
    ids = torch.tensor([[4, 5, 6, 7]])
    _, expected = model.teacher_forced(ids, torch.tensor([4]),
                                       torch.tensor([[2, 4, 5, 6, 1]]))
    torch.testing.assert_close(weights, expected[0], atol=1e-5, rtol=0)


def test_a_reversed_source_models_weights_are_in_the_sources_order():
    """With reverse_source the encoder reads [c b a]; the figure labels its columns a b c. The
    weights come back in the source's order: those of the same weights with reverse_source off,
    fed the reversed sentence, read right to left (padding stays at the end)."""
    src_vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "a", "dog", "runs", "."), "s" * 64)
    tgt_vocab = Vocab(("<pad>", "<unk>", "<bos>", "<eos>", "un", "chien", "court"), "t" * 64)
    models = {}
    for reverse in (True, False):
        cfg = RNNConfig(arch="attention", cell="gru", num_layers=1, hidden_size=8, embed_size=6,
                        init_range=1.0, reverse_source=reverse)
        models[reverse] = build_model(cfg, src_vocab=len(src_vocab), tgt_vocab=len(tgt_vocab),
                                      pad=0).eval()
    models[True].init_weights(4)
    models[False].load_state_dict(models[True].state_dict())
    source, target = ["a", "dog", "runs", "."], ["un", "chien", "court"]
    got = torch.tensor(weights_for(models[True], src_vocab, tgt_vocab, source, target))
    mirror = torch.tensor(weights_for(models[False], src_vocab, tgt_vocab, source[::-1], target))
    assert (got - mirror).abs().max() > 0.05  # the two orders do differ here
    torch.testing.assert_close(got, mirror.flip(-1), atol=1e-5, rtol=0)
    # a padded batch: each row un-reversed inside its own length
    src = torch.tensor([[4, 5, 6, 7], [6, 5, 0, 0]])
    lengths, tgt_in = torch.tensor([4, 2]), torch.tensor([[2, 4, 5], [2, 6, 4]])
    with torch.no_grad():
        _, w = models[True].teacher_forced(src, lengths, tgt_in)  # (N, T, S)
        _, w_fwd = models[False].teacher_forced(torch.tensor([[7, 6, 5, 4], [5, 6, 0, 0]]),
                                                lengths, tgt_in)
    torch.testing.assert_close(w[0], w_fwd[0].flip(-1), atol=1e-6, rtol=0)
    torch.testing.assert_close(w[1, :, :2], w_fwd[1, :, :2].flip(-1), atol=1e-6, rtol=0)
    assert torch.all(w[1, :, 2:] == 0)  # padding keeps weight 0, where it was
