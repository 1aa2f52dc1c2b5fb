"""The architecture contract (s2s.arch): what each architecture declares it can do is what the
analyses really accept, so `s2s check` (which asks the declaration) refuses exactly the analyses
that would fail inside the analyze stage."""

import pytest
import torch

from s2s import arch
from s2s.analysis import probes
from s2s.arch.rnn import RNNConfig
from s2s.arch.transformer import TransformerConfig
from s2s.model import build_model

SRC = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 11, 0, 0], [12, 3, 0, 0, 0]])
LENGTHS = torch.tensor([5, 3, 2])

CONFIGS = [
    RNNConfig(arch="seq2seq", cell="lstm", num_layers=2, hidden_size=8, embed_size=6),
    RNNConfig(arch="seq2seq", cell="peephole", num_layers=1, hidden_size=8, embed_size=6),
    RNNConfig(arch="seq2seq", cell="gru", num_layers=2, hidden_size=8, embed_size=6),
    RNNConfig(arch="cho", cell="cho_gru", num_layers=1, hidden_size=8, embed_size=6),
    RNNConfig(arch="attention", cell="gru", attention="additive", num_layers=1, hidden_size=8,
              embed_size=6),
    RNNConfig(arch="attention", cell="lstm", attention="additive", num_layers=1, hidden_size=8,
              embed_size=6),
    TransformerConfig(d_model=8, heads=2, kv_heads=1, ff_size=16, encoder_layers=1,
                      decoder_layers=1),
]


def _model(cfg):
    model = build_model(cfg, src_vocab=20, tgt_vocab=17, pad=0)
    model.init_weights(1)
    return model.eval()


def _analysable(model) -> bool:
    """Figure 2's vectors and gradient reach both run on the model."""
    try:
        probes.sentence_vectors(model, SRC, LENGTHS)
        probes.first_word_gradients(model, SRC, LENGTHS, torch.tensor([4, 5, 6]), bos=2)
    except AttributeError:
        return False
    return True


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.arch}-{getattr(c, 'cell', '')}")
def test_each_declared_capability_is_what_the_analyses_accept(cfg):
    model = _model(cfg)
    assert arch.capable(cfg, "analysis") == _analysable(model)
    assert arch.capable(cfg, "memory") == probes.recurrent_encoder(model)
    assert arch.capable(cfg, "forget_gates") == probes.traceable(model)
    assert arch.capable(cfg, "attention_map") == (cfg.arch == "attention")
    assert arch.capable(cfg, "cross_attention_map") == (cfg.arch == "transformer")


def test_every_architecture_declares_known_capabilities_and_unknown_ones_are_refused():
    for a in arch.ARCHITECTURES.values():
        assert a.can <= set(arch.CAPABILITIES), a.name
    with pytest.raises(ValueError, match="unknown capabilities"):
        arch.Architecture("x", "m:C", "m:M", frozenset({"telepathy"}))
    with pytest.raises(ValueError, match="unknown capability 'telepathy'"):
        arch.capable(CONFIGS[0], "telepathy")
    assert arch.able("memory") == ["seq2seq", "cho"]
