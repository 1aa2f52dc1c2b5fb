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
