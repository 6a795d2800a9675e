"""Properties every seq2seq model must have (Transformer post/pre-norm and the RNN): one interface."""

import pytest
import torch

from attnkit.errors import ConfigError
from attnkit.model import (
    ClassifierConfig,
    LMConfig,
    RNNConfig,
    Transformer,
    TransformerClassifier,
    TransformerConfig,
    TransformerLM,
    count_parameters,
)
from helpers import make_model, random_tokens


def test_causality_future_target_tokens_do_not_change_earlier_logits(seq2seq):
    src, tgt = random_tokens(2, 6, seed=1), random_tokens(2, 7, seed=2)
    logits = seq2seq(src, tgt)
    changed = tgt.clone()
    changed[:, 4:] = random_tokens(2, 3, seed=3)
    logits2 = seq2seq(src, changed)
    torch.testing.assert_close(logits[:, :4], logits2[:, :4], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits[:, 4:], logits2[:, 4:])


def test_padding_invariance_extra_source_padding_changes_nothing(seq2seq):
    src, tgt = random_tokens(2, 6, seed=4), random_tokens(2, 5, seed=5)
    src[1, 4:] = 0  # a shorter sentence in the batch
    padded = torch.cat([src, torch.zeros(2, 5, dtype=torch.long)], dim=1)
    torch.testing.assert_close(seq2seq(src, tgt), seq2seq(padded, tgt), atol=1e-5, rtol=1e-5)


def test_batch_neighbours_do_not_leak(seq2seq):
    src, tgt = random_tokens(3, 6, seed=6), random_tokens(3, 5, seed=7)
    alone = seq2seq(src[:1], tgt[:1])
    torch.testing.assert_close(seq2seq(src, tgt)[:1], alone, atol=1e-5, rtol=1e-5)


def test_cached_incremental_decoding_equals_full_recompute(seq2seq):
    src, tgt = random_tokens(2, 6, seed=8), random_tokens(2, 7, seed=9)
    full = seq2seq(src, tgt)
    state = seq2seq.init_state(seq2seq.encode(src))
    steps = [seq2seq.decode(tgt[:, t : t + 1], state).logits for t in range(7)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert len(state) == 7


def test_state_select_keeps_and_reorders_sentences(seq2seq):
    src, tgt = random_tokens(3, 6, seed=10), random_tokens(3, 4, seed=11)
    state = seq2seq.init_state(seq2seq.encode(src))
    seq2seq.decode(tgt[:, :3], state)
    keep = torch.tensor([2, 0])
    state.select(keep)
    step = seq2seq.decode(tgt[keep, 3:], state).logits
    torch.testing.assert_close(step[:, 0], seq2seq(src[keep], tgt[keep])[:, 3], atol=1e-5, rtol=1e-5)


def test_state_expand_and_reorder_follow_hypotheses_within_sentences(seq2seq):
    """Beam moves: K rows per sentence share its encoder output; each row continues its own prefix."""
    K = 3
    src, tgt = random_tokens(2, 6, seed=20), random_tokens(2 * K, 5, seed=21)
    tgt[:, 0] = tgt[::K, 0].repeat_interleave(K)  # the K hypotheses of a sentence share the first token
    state = seq2seq.init_state(seq2seq.encode(src))
    seq2seq.decode(tgt[::K, :1], state)
    state.expand(K)
    assert state.group == K
    rows = torch.tensor([2, 0, 0, 4, 5, 3])  # moves stay inside each sentence's K rows
    seq2seq.decode(tgt[:, 1:3], state)
    state.reorder(rows)
    step = seq2seq.decode(tgt[rows, 3:4], state).logits
    expected = seq2seq(src.repeat_interleave(K, 0)[rows], tgt[rows, :4])[:, 3]
    torch.testing.assert_close(step[:, 0], expected, atol=1e-5, rtol=1e-5)
    state.select(torch.tensor([1]))  # sentence 1 only: its K rows, in order
    step = seq2seq.decode(tgt[rows][K:, 4:5], state).logits
    expected = seq2seq(src[1:].repeat_interleave(K, 0), tgt[rows][K:, :5])[:, 4]
    torch.testing.assert_close(step[:, 0], expected, atol=1e-5, rtol=1e-5)


def test_every_parameter_receives_a_gradient(seq2seq):
    seq2seq.train()
    src, tgt = random_tokens(3, 6, seed=12), random_tokens(3, 5, seed=13)
    seq2seq(src, tgt).logsumexp(-1).sum().backward()
    missing = [n for n, p in seq2seq.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert missing == []
    assert all(p.grad.abs().sum() > 0 for n, p in seq2seq.named_parameters() if "bias" not in n)


def test_attention_weights_are_returned_per_layer():
    model = make_model("transformer")
    src, tgt = random_tokens(2, 6), random_tokens(2, 4)
    enc = model.encode(src, need_weights=True)
    out = model.decode(tgt, model.init_state(enc), need_weights=True)
    cfg = model.config
    assert len(enc.self_attn) == cfg.n_encoder_layers and enc.self_attn[0].shape == (2, cfg.n_heads, 6, 6)
    assert out.cross_attn[0].shape == (2, cfg.n_heads, 4, 6) and out.self_attn[0].shape == (
        2,
        cfg.n_heads,
        4,
        4,
    )
    torch.testing.assert_close(out.logits, model(src, tgt), atol=1e-5, rtol=1e-5)


def test_encoder_without_positions_is_permutation_equivariant():
    model = make_model("transformer")
    x = torch.randn(2, 6, model.config.d_model)
    perm = torch.randperm(6)
    out, _ = model.encoder(x, None)
    out_perm, _ = model.encoder(x[:, perm], None)
    torch.testing.assert_close(out_perm, out[:, perm], atol=1e-5, rtol=1e-5)


def test_positional_encoding_breaks_permutation_symmetry():
    model = make_model("transformer")
    src = random_tokens(1, 6)
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    assert not torch.allclose(model.encode(src[:, perm]).memory, model.encode(src).memory[:, perm], atol=1e-4)


def test_tied_embeddings_share_one_matrix_and_count_once():
    shared = Transformer(TransformerConfig.preset("tiny", share_vocab=True, tie_output=True))
    assert shared.src_embed is shared.tgt_embed
    separate = Transformer(TransformerConfig.preset("tiny", tie_output=False))
    V, D = 20, 32
    assert count_parameters(separate) - count_parameters(shared) == V * D + (V * D + V)


def test_base_preset_is_the_papers_model():
    cfg = TransformerConfig.preset("base", share_vocab=True, src_vocab_size=37000, tgt_vocab_size=37000)
    assert (cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.dropout) == (
        512,
        8,
        2048,
        6,
        6,
        0.1,
    )
    assert cfg.norm == "post" and cfg.positional == "sinusoidal"
    # 6 encoder layers (4D^2 + 2D*d_ff) + 6 decoder layers (8D^2 + 2D*d_ff) + V*D:
    # about 63M, the paper's "65M".
    assert 60e6 < count_parameters(Transformer(cfg)) < 66e6


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"d_model": 30}, "d_model"),
        ({"dropout": 1.5}, "dropout"),
        ({"norm": "sandwich"}, "norm"),
        ({"positional": "alibi"}, "positional"),
        ({"n_heads": 0}, "n_heads"),
        ({"share_vocab": True, "src_vocab_size": 10}, "share_vocab"),
        ({"activation": "tanh"}, "activation"),
        ({"dmodel": 3}, "dmodel"),
        ({"d_ff": "big"}, "d_ff"),
    ],
)
def test_invalid_config_is_an_error_naming_the_field(bad, field):
    with pytest.raises(ConfigError, match=field):
        TransformerConfig.preset("tiny", **bad)


def test_config_round_trips_through_dict():
    cfg = TransformerConfig.preset("tiny", positional="learned", norm="pre")
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="hidden"):
        RNNConfig.from_dict({"hidden": 3})


def test_learned_positions_model_runs():
    model = Transformer(TransformerConfig.preset("tiny", positional="learned")).eval()
    assert model(random_tokens(2, 5), random_tokens(2, 4)).shape == (2, 4, 20)


def test_over_long_input_is_a_clear_error():
    model = make_model("transformer")
    with pytest.raises(ValueError, match="max_len"):
        model.encode(random_tokens(1, model.config.max_len + 1))


def test_language_model_is_causal_and_caches():
    torch.manual_seed(0)
    lm = TransformerLM(LMConfig.preset("tiny")).eval()
    x = random_tokens(2, 8)
    logits = lm(x)
    assert logits.shape == (2, 8, 20)
    y = x.clone()
    y[:, 5:] = random_tokens(2, 3, seed=9)
    torch.testing.assert_close(lm(y)[:, :5], logits[:, :5], atol=1e-5, rtol=1e-5)
    state = lm.init_state(2)
    steps = torch.cat([lm.decode(x[:, t : t + 1], state).logits for t in range(8)], 1)
    torch.testing.assert_close(steps, logits, atol=1e-5, rtol=1e-5)
    # A right-padded batch row gives the same logits at its real positions as the row alone.
    short = x[:1, :5]
    padded = torch.cat([short, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(lm(padded)[:, :5], lm(short), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "first", "attention"])
def test_classifier_pools_real_tokens_only(pooling):
    torch.manual_seed(0)
    clf = TransformerClassifier(ClassifierConfig.preset("tiny", n_classes=3, pooling=pooling)).eval()
    x = random_tokens(2, 6)
    x[1, 4:] = 0
    logits = clf(x)
    assert logits.shape == (2, 3)
    padded = torch.cat([x, torch.zeros(2, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(clf(padded), logits, atol=1e-5, rtol=1e-5)
    out = clf.classify(x, need_weights=True)
    T = 7 if pooling == "first" else 6  # the CLS token comes first
    assert out.self_attn[0].shape == (2, 4, T, T)


def test_checkpoints_from_before_the_tied_output_layer_still_load():
    """Older checkpoints hold no output_proj.weight: with tied embeddings it is the target embedding."""
    model = make_model("transformer")
    old = {k: v for k, v in model.state_dict().items() if k != "output_proj.weight"}
    fresh = make_model("transformer", dropout=0.0)
    torch.nn.init.zeros_(fresh.tgt_embed.embedding.weight)
    fresh.load_state_dict(old)
    src, tgt = random_tokens(2, 5), random_tokens(2, 4)
    torch.testing.assert_close(fresh(src, tgt), model(src, tgt))
