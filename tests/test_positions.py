"""Relative (Shaw et al., 2018) and rotary (RoPE) positions: scores depend on distance only, the
cache equals full recomputation, beam 1 equals greedy, padding changes nothing, the fused path
equals the reference path, for the Transformer (post and pre norm), the LM and the classifier."""

import pytest
import torch

from attnkit.attention import KVCache, MultiHeadAttention, RelativePositions, RotaryPositions
from attnkit.checkpoint import model_from_checkpoint
from attnkit.decoding import beam_search, greedy_search
from attnkit.decoding.beam import beam_decode
from attnkit.decoding.greedy import greedy_decode
from attnkit.errors import ConfigError
from attnkit.model import (
    ClassifierConfig,
    LMConfig,
    Transformer,
    TransformerClassifier,
    TransformerConfig,
    TransformerLM,
)
from helpers import random_tokens

torch.set_num_threads(1)

# (positional, relative_values): every kind that acts inside self-attention
KINDS = [("relative", False), ("relative", True), ("rotary", False)]
KIND_IDS = ["relative", "relative-values", "rotary"]
CLIP = 3  # short enough that the tiny tests cross it


def scheme(kind: str, values: bool, d_head: int = 8):
    torch.manual_seed(0)
    if kind == "rotary":
        return RotaryPositions(d_head, max_len=64)
    pos = RelativePositions(d_head, CLIP, values=values)
    if values:  # a^V starts at zero; give it values so that the tests see it
        torch.nn.init.normal_(pos.a_v)
    return pos


def mha(kind: str, values: bool) -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(16, 2, positions=scheme(kind, values)).eval()


def transformer(kind: str, values: bool, norm: str = "post") -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig.preset(
        "tiny", positional=kind, relative_values=values, relative_clip=CLIP, norm=norm
    )
    model = Transformer(cfg).eval()
    _randomize_value_embeddings(model)
    return model


def lm(kind: str, values: bool) -> TransformerLM:
    torch.manual_seed(0)
    model = TransformerLM(
        LMConfig.preset("tiny", positional=kind, relative_values=values, relative_clip=CLIP)
    )
    _randomize_value_embeddings(model)
    return model.eval()


def _randomize_value_embeddings(model) -> None:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, RelativePositions) and m.a_v is not None:
                m.a_v.normal_()


# --- scores depend only on the distance ------------------------------------------------------


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
def test_shifting_every_position_leaves_the_weights_unchanged(kind, values):
    """The same T tokens at positions 0..T-1, then at c..c+T-1 behind c masked cache entries."""
    attn = mha(kind, values)
    x = torch.randn(2, 5, 16)
    ref_out, ref_w = attn(x, x, x, causal=True, need_weights=True)
    for c in (1, 4, 9):
        cache = KVCache()
        attn(torch.randn(2, c, 16), causal=True, cache=cache, key=torch.randn(2, c, 16))  # c filler keys
        real = torch.arange(c + 5) >= c  # (Tk,) hide the filler
        out, w = attn(
            x, x, x, causal=True, cache=cache, key_padding_mask=real.expand(2, -1), need_weights=True
        )
        torch.testing.assert_close(w[..., c:], ref_w, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)


def test_rotary_scores_are_exactly_relative():
    """R_m q . R_n k depends on n - m only: the same pair of vectors at any absolute offset."""
    rope = RotaryPositions(8, max_len=64)
    q, k = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8, dtype=torch.float64)
    rope = rope.double()
    for distance in (0, 3, -2):
        scores = [(rope.rotate(q, m) * rope.rotate(k, m + distance)).sum().item() for m in range(2, 40, 7)]
        assert max(scores) - min(scores) < 1e-6  # the cos/sin tables are float32
    moved = (rope.rotate(q, 0) * rope.rotate(k, 5)).sum().item()
    assert abs(moved - (q * k).sum().item()) > 1e-6  # rotation does change the score with distance


def test_relative_distances_beyond_the_clip_look_alike():
    """Equal keys farther than the clipping distance get equal weights; within it they differ."""
    attn = mha("relative", False)
    x = torch.randn(1, 10, 16)
    x[0, 1:] = x[0, 1]  # keys 1..9 are one and the same vector
    _, w = attn(x, x, x, need_weights=True)  # (1, H, 10, 10)
    far = w[0, :, 0, 1 + CLIP :]  # query 0 to keys at distance > CLIP (all clipped to +CLIP)
    torch.testing.assert_close(far, far[:, :1].expand_as(far))
    near = w[0, :, 0, 1 : CLIP + 1]  # distances 1..CLIP: distinct embeddings
    assert (near - near[:, :1]).abs().max() > 1e-4


@pytest.mark.parametrize("kind", ["relative", "rotary"])
def test_embeddings_carry_no_absolute_position(kind):
    model = transformer(kind, False)
    tokens = random_tokens(2, 4)
    assert model.src_embed.positions is None
    torch.testing.assert_close(model.tgt_embed(tokens, 0), model.tgt_embed(tokens, 7))


def _naive_self_attention(attn: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """Shaw et al. eqs. 3-5 and RoPE written out position by position, one head at a time."""
    import math

    B, T, D = x.shape
    H, Dh = attn.n_heads, attn.d_head
    pos = attn.positions
    q = attn.q_proj(x).view(B, T, H, Dh)
    k, v = (t.view(B, T, H, Dh) for t in attn.kv_proj(x).chunk(2, dim=-1))
    if isinstance(pos, RotaryPositions):
        half = Dh // 2

        def rot(u, m):  # rotate each pair (u_i, u_(i+Dh/2)) by m * theta_i
            out = u.clone()
            for i in range(half):
                theta = m * 10000.0 ** (-2 * i / Dh)
                c, s = math.cos(theta), math.sin(theta)
                out[..., i] = u[..., i] * c - u[..., i + half] * s
                out[..., i + half] = u[..., i] * s + u[..., i + half] * c
            return out

        q = torch.stack([rot(q[:, m], m) for m in range(T)], dim=1)
        k = torch.stack([rot(k[:, m], m) for m in range(T)], dim=1)
    z = torch.zeros(B, T, H, Dh)
    for i in range(T):
        e = torch.zeros(B, H, T)
        for j in range(T):
            key = k[:, j]
            if isinstance(pos, RelativePositions):
                key = key + pos.a_k[max(-pos.clip, min(pos.clip, j - i)) + pos.clip]  # k_j + a^K_ij
            e[:, :, j] = (q[:, i] * key).sum(-1) / math.sqrt(Dh)
        alpha = e.softmax(-1)  # (B, H, T)
        for j in range(T):
            value = v[:, j]
            if isinstance(pos, RelativePositions) and pos.a_v is not None:
                value = value + pos.a_v[max(-pos.clip, min(pos.clip, j - i)) + pos.clip]  # v_j + a^V_ij
            z[:, i] += alpha[..., j, None] * value
    return attn.out_proj(z.reshape(B, T, D))


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
def test_self_attention_equals_the_papers_formulas(kind, values):
    attn = mha(kind, values)
    x = torch.randn(2, 7, 16)  # 7 > CLIP: distances are clipped
    with torch.no_grad():
        expected = _naive_self_attention(attn, x)
        fused, _ = attn(x, x, x)
        ref, _ = attn(x, x, x, need_weights=True)
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ref, expected, atol=1e-5, rtol=1e-4)


# --- fused path ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("case", ["self", "self-padding", "causal", "causal-padding", "cached"])
def test_fused_path_equals_reference_path(kind, values, case):
    attn = mha(kind, values)
    x = torch.randn(3, 6, 16)
    mask = None
    if "padding" in case:
        mask = torch.arange(6)[None, :] < torch.tensor([6, 4, 1])[:, None]  # (B, Tk)
    causal = case != "self" and case != "self-padding"
    caches = [KVCache(), KVCache()] if case == "cached" else [None, None]
    if case == "cached":
        prefix = torch.randn(3, 4, 16)
        for cache in caches:
            attn(prefix, prefix, prefix, causal=True, cache=cache)
    fused, none = attn(x, x, x, key_padding_mask=mask, causal=causal, cache=caches[0])
    ref, w = attn(x, x, x, key_padding_mask=mask, causal=causal, cache=caches[1], need_weights=True)
    assert none is None and w is not None
    torch.testing.assert_close(fused, ref, atol=1e-5, rtol=1e-5)


def test_relative_key_bias_gradients_match_reference():
    """The float-mask (fused) path and the reference path give the same gradients, a^K included."""
    grads = []
    for need_weights in (False, True):
        attn = mha("relative", False)
        x = torch.randn(2, 5, 16)
        out, _ = attn(x, x, x, causal=True, need_weights=need_weights)
        out.square().sum().backward()
        grads.append({name: p.grad.clone() for name, p in attn.named_parameters()})
    for name, fused in grads[0].items():
        torch.testing.assert_close(fused, grads[1][name], atol=1e-5, rtol=1e-4)
    assert grads[0]["positions.a_k"].abs().sum() > 0  # a^K is trained through the float mask


# --- the models ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_transformer_cached_decoding_equals_full_recompute(kind, values, norm):
    model = transformer(kind, values, norm)
    src, tgt = random_tokens(3, 7, seed=2), random_tokens(3, 8, seed=4)
    src[1, 4:] = 0
    full = model(src, tgt)  # (B, T, V)
    state = model.init_state(model.encode(src))
    parts = [model.decode(tgt[:, :3], state).logits]  # a prefix of 3, then one position at a time
    parts += [model.decode(tgt[:, t : t + 1], state).logits for t in range(3, 8)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
def test_lm_cached_decoding_equals_full_recompute(kind, values):
    model = lm(kind, values)
    tokens = random_tokens(2, 9, seed=6)
    full = model(tokens)
    state = model.init_state(2)
    parts = [model.decode(tokens[:, :4], state).logits]
    parts += [model.decode(tokens[:, t : t + 1], state).logits for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_transformer_beam_one_equals_greedy(kind, values, norm):
    model = transformer(kind, values, norm)
    src = random_tokens(5, 7, seed=3)
    src[2, 3:] = 0
    greedy = greedy_search(model, src, max_len_a=2.0, max_len_b=5)
    beam = beam_search(model, src, beam_size=1, length_penalty=0.0, max_len_a=2.0, max_len_b=5)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]
    for g, (b,) in zip(greedy, beam, strict=True):
        assert g.log_prob == pytest.approx(b.log_prob, abs=1e-4)


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
def test_lm_beam_one_equals_greedy(kind, values):
    model = lm(kind, values)
    start = torch.full((3, 1), model.config.bos_id)
    limits = torch.full((3,), 12)
    greedy = greedy_decode(model, model.init_state(3), start, limits)
    beam = beam_decode(model, model.init_state(3), start, limits, beam_size=1, length_penalty=0.0)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_transformer_padding_changes_nothing(kind, values, norm):
    """A sentence alone and the same sentence padded inside a batch of longer ones: equal logits."""
    model = transformer(kind, values, norm)
    src = random_tokens(3, 9, seed=8)
    src[0, 5:] = 0
    tgt = random_tokens(3, 6, seed=9)
    batch = model(src, tgt)[0]
    alone = model(src[:1, :5], tgt[:1])[0]
    torch.testing.assert_close(batch, alone, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
def test_lm_padding_changes_nothing(kind, values):
    model = lm(kind, values)
    tokens = random_tokens(2, 8, seed=10)
    tokens[0, 5:] = 0
    torch.testing.assert_close(model(tokens)[0, :5], model(tokens[:1, :5])[0], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("pooling", ["mean", "first", "attention"])
def test_classifier_padding_changes_nothing(kind, values, pooling):
    torch.manual_seed(0)
    cfg = ClassifierConfig.preset(
        "tiny", positional=kind, relative_values=values, relative_clip=CLIP, pooling=pooling, n_classes=3
    )
    model = TransformerClassifier(cfg).eval()
    _randomize_value_embeddings(model)
    tokens = random_tokens(3, 9, seed=11)
    tokens[1, 4:] = 0
    torch.testing.assert_close(model(tokens)[1], model(tokens[1:2, :4])[0], atol=1e-5, rtol=1e-4)


def test_classifier_with_relative_positions_tells_order_apart():
    """Without absolute positions the encoder still sees order (a bag-of-words model would not)."""
    for kind in ("relative", "rotary"):
        torch.manual_seed(0)
        model = TransformerClassifier(ClassifierConfig.preset("tiny", positional=kind)).eval()
        tokens = random_tokens(1, 6, seed=12)
        assert (model(tokens) - model(tokens.flip(1))).abs().max() > 1e-5


# --- configs and checkpoints -----------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,field",
    [
        (dict(positional="relative", relative_clip=0), "relative_clip"),
        (dict(positional="sinusoidal", relative_values=True), "relative_values"),
        (dict(positional="rotary", d_model=36, n_heads=4), "positional"),  # head size 9 is odd
        (dict(positional="alibi"), "positional"),
    ],
)
def test_bad_positional_config_names_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field):
        TransformerConfig.preset("tiny", **overrides)


@pytest.mark.parametrize("kind,values", KINDS, ids=KIND_IDS)
def test_checkpoint_round_trip(kind, values):
    model = transformer(kind, values)
    state = {"arch": "transformer", "model_config": model.config.to_dict(), "model": model.state_dict()}
    again = model_from_checkpoint(state).eval()
    src, tgt = random_tokens(2, 5), random_tokens(2, 4, seed=2)
    torch.testing.assert_close(again(src, tgt), model(src, tgt))
    names = set(model.state_dict())
    assert any(n.endswith("self_attn.positions.a_k") for n in names) == (kind == "relative")
    assert not any("cross_attn.positions" in n for n in names)


def test_experiment_config_takes_the_positional_fields():
    from attnkit.train.config import load_config

    cfg = load_config(
        None, ["model.positional=relative", "model.relative_clip=8", "model.relative_values=true"]
    )
    assert cfg.model["relative_clip"] == 8
    with pytest.raises(ConfigError, match="relative_clip"):
        load_config(None, ["model.positional=relative", "model.relative_clip=0"])
