"""Attention: reference math against the fused kernel and torch.nn.MultiheadAttention; masks."""

import pytest
import torch

from attnkit.attention import (
    AdditiveAttention,
    KVCache,
    MultiHeadAttention,
    MultiplicativeAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)
from attnkit.attention.cache import DeferredKVCache


def test_masks_follow_one_convention():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    m = padding_mask(tokens, pad_id=0)
    assert m.shape == (2, 1, 1, 4) and m.dtype == torch.bool
    assert m[0, 0, 0].tolist() == [True, True, False, False]
    c = causal_mask(3)
    assert c.tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_fully_masked_query_row_gives_zeros_not_nan():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[1, 2] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert torch.all(out[1, 2] == 0) and torch.all(w[1, 2] == 0)
    torch.testing.assert_close(w[0].sum(-1), torch.ones(3))


def test_masked_keys_get_zero_weight():
    q, k, v = torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    mask = torch.tensor([[[True, False, True]]])
    _, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.all(w[..., 1] == 0)


@pytest.mark.parametrize(
    "case", ["self", "self-padding", "self-causal", "self-causal-padding", "cross", "cross-padding"]
)
def test_fused_path_equals_reference_path(case):
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    B, Tq = 3, 6
    Tk = 9 if case.startswith("cross") else Tq
    x = torch.randn(B, Tq, 32)
    mem = torch.randn(B, Tk, 32) if case.startswith("cross") else x
    kpm = None
    if "padding" in case:
        lengths = torch.tensor([Tk, Tk - 2, 1])
        kpm = torch.arange(Tk)[None, :] < lengths[:, None]  # (B, Tk) True = real
    causal = "causal" in case
    fused, none = mha(x, mem, mem, key_padding_mask=kpm, causal=causal)
    ref, w = mha(x, mem, mem, key_padding_mask=kpm, causal=causal, need_weights=True)
    assert none is None and w.shape == (B, 4, Tq, Tk)
    torch.testing.assert_close(fused, ref, atol=1e-5, rtol=1e-5)
    if causal:
        assert torch.all(w.triu(diagonal=1) == 0)


@pytest.mark.parametrize("cross", [False, True])
def test_multihead_equals_torch_multiheadattention(cross):
    torch.manual_seed(0)
    D, H = 32, 4
    ours = MultiHeadAttention(D, H).eval()
    ref = torch.nn.MultiheadAttention(D, H, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.kv_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.kv_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    x = torch.randn(2, 5, D)
    mem = torch.randn(2, 7, D) if cross else x
    real = torch.ones(2, mem.size(1), dtype=torch.bool)
    real[1, -3:] = False
    out, w = ours(x, mem, mem, key_padding_mask=real, need_weights=True)
    # PyTorch's padding mask uses the opposite convention: True = ignore.
    ref_out, ref_w = ref(x, mem, mem, key_padding_mask=~real, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    fused, _ = ours(x, mem, mem, key_padding_mask=real)
    torch.testing.assert_close(fused, ref_out, atol=1e-5, rtol=1e-5)


def test_self_attention_cache_equals_full_causal_pass():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2).eval()
    x = torch.randn(2, 5, 16)
    full, _ = mha(x, x, x, causal=True)
    cache = KVCache()
    steps = [
        mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], causal=True, cache=cache)[0] for t in range(5)
    ]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert len(cache) == 5
    # Two steps at once after a prefix of three: the offset causal mask.
    cache2 = KVCache()
    a, _ = mha(x[:, :3], x[:, :3], x[:, :3], causal=True, cache=cache2)
    b, _ = mha(x[:, 3:], x[:, 3:], x[:, 3:], causal=True, cache=cache2)
    torch.testing.assert_close(torch.cat([a, b], 1), full, atol=1e-5, rtol=1e-5)


def test_deferred_cache_records_moves_and_carries_them_out_in_the_next_append():
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(6, 2, 3, 4, generator=g), torch.randn(6, 2, 3, 4, generator=g)
    cache = DeferredKVCache()
    cache.append(k, v)
    r1, r2 = torch.tensor([5, 0, 0, 2, 3, 1]), torch.tensor([1, 1, 4, 0])
    cache.select(r1)
    cache.select(r2)  # moves compose: row i is now k[r1][r2][i]
    new_k, new_v = torch.randn(4, 2, 1, 4, generator=g), torch.randn(4, 2, 1, 4, generator=g)
    got_k, got_v = cache.append(new_k, new_v)
    want_k, want_v = torch.cat([k[r1][r2], new_k], dim=2), torch.cat([v[r1][r2], new_v], dim=2)
    assert torch.equal(got_k, want_k) and torch.equal(got_v, want_v) and len(cache) == 4
    cache.select(torch.tensor([3, 3]))
    assert torch.equal(cache.k, want_k[[3, 3]]) and torch.equal(cache.v, want_v[[3, 3]])  # reading moves
    cache.select(torch.tensor([1, 0]))
    cache.k = cache.k[:, :, 1:]  # a setter carries out the move first, then replaces
    assert torch.equal(cache.k, want_k[[3, 3]][:, :, 1:]) and torch.equal(cache.v, want_v[[3, 3]])
    cache.select(torch.tensor([0]))
    with pytest.raises(ValueError, match="2 new rows for a cache of 1 rows"):
        cache.append(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4))


@pytest.mark.parametrize("kind", [KVCache, DeferredKVCache])
def test_cache_move_keeps_gradients_when_training(kind):
    k = torch.randn(3, 2, 2, 4, requires_grad=True)
    cache = kind()
    cache.append(k, k * 2)
    cache.select(torch.tensor([2, 0]))
    out_k, _ = cache.append(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4))
    out_k.sum().backward()
    assert k.grad[:, 0, 0, 0].tolist() == [1.0, 0.0, 1.0]


def test_plain_and_deferred_caches_hold_the_same_rows_after_the_same_moves():
    g = torch.Generator().manual_seed(1)
    plain, deferred = KVCache(), DeferredKVCache()
    for step, rows in enumerate([None, [0, 0, 2], [2, 1, 1], [1]]):
        for cache in (plain, deferred):
            if rows is not None:
                cache.select(torch.tensor(rows))
        n = 3 if step < 3 else 1
        k, v = torch.randn(n, 2, 1, 4, generator=g), torch.randn(n, 2, 1, 4, generator=g)
        got_plain, got_deferred = plain.append(k, v), deferred.append(k, v)
        assert all(torch.equal(a, b) for a, b in zip(got_plain, got_deferred, strict=True))
    assert len(plain) == len(deferred) == 4


def test_cross_attention_with_keys_values_projected_once_equals_projecting_each_call():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2).eval()
    y, mem = torch.randn(2, 3, 16), torch.randn(2, 4, 16)
    kv = mha.keys_values(mem)
    steps = [mha(y[:, t : t + 1], kv=kv)[0] for t in range(3)]
    torch.testing.assert_close(torch.cat(steps, 1), mha(y, mem, mem)[0], atol=1e-6, rtol=1e-5)


def test_distinct_key_and_value_inputs_use_their_halves_of_kv_proj():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2).eval()
    ref = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.kv_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.kv_proj.bias]))
        ref.out_proj.load_state_dict(mha.out_proj.state_dict())
    q, k, v = torch.randn(2, 3, 16), torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    torch.testing.assert_close(mha(q, k, v)[0], ref(q, k, v, need_weights=False)[0], atol=1e-5, rtol=1e-5)


def test_checkpoints_with_a_packed_in_proj_still_load():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2)
    old = {k: v for k, v in mha.state_dict().items() if not k.startswith(("q_proj", "kv_proj"))}
    old["in_proj.weight"] = torch.cat([mha.q_proj.weight, mha.kv_proj.weight]).detach().clone()
    old["in_proj.bias"] = torch.cat([mha.q_proj.bias, mha.kv_proj.bias]).detach().clone()
    fresh = MultiHeadAttention(16, 2)
    fresh.load_state_dict(old)
    x = torch.randn(1, 4, 16)
    torch.testing.assert_close(fresh(x, x, x)[0], mha(x, x, x)[0])


@pytest.mark.parametrize("scorer", ["additive", "multiplicative"])
def test_recurrent_attention_weights_and_context(scorer):
    torch.manual_seed(0)
    B, S, Ds, Dh = 2, 5, 6, 8
    attn = AdditiveAttention(Ds, Dh, 7) if scorer == "additive" else MultiplicativeAttention(Ds, Dh)
    s, h = torch.randn(B, Ds), torch.randn(B, S, Dh)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    c, alpha = attn(s, h, mask=mask)
    assert c.shape == (B, Dh) and alpha.shape == (B, S)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(B))
    assert torch.all(alpha[1, 3:] == 0)
    torch.testing.assert_close(c, torch.einsum("bs,bsd->bd", alpha, h))
    # Precomputed keys give the same result (the decoder computes them once per sentence).
    c2, _ = attn(s, h, keys=attn.keys(h), mask=mask)
    torch.testing.assert_close(c, c2)
    if scorer == "additive":  # e_j = v^T tanh(W s + U h_j), by hand
        e = attn.v(torch.tanh(attn.W(s)[:, None] + attn.U(h))).squeeze(-1)
        e = e.masked_fill(~mask, float("-inf"))
        torch.testing.assert_close(alpha, torch.softmax(e, -1))


@pytest.mark.parametrize("need_weights", [False, True])
def test_grouped_queries_share_keys_like_repeated_keys(need_weights):
    """Beam search keeps one row of encoder keys per sentence for its K beams' queries."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2).eval()
    K, B = 3, 2
    y, mem = torch.randn(B * K, 1, 16), torch.randn(B, 5, 16)
    real = torch.tensor([[True] * 5, [True, True, True, False, False]])
    grouped, gw = mha(y, mem, mem, key_padding_mask=real, kv_group=K, need_weights=need_weights)
    rows = torch.arange(B).repeat_interleave(K)
    repeated, rw = mha(y, mem[rows], mem[rows], key_padding_mask=real[rows], need_weights=need_weights)
    torch.testing.assert_close(grouped, repeated, atol=1e-6, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(gw, rw)


def test_grouped_queries_must_match_the_stated_group():
    mha = MultiHeadAttention(16, 2).eval()
    y, mem = torch.randn(6, 1, 16), torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match="groups of 2"):
        mha(y, mem, mem, kv_group=2)  # 6 query rows are 3 per sentence, not 2: never guessed


@pytest.mark.parametrize("scorer", ["additive", "multiplicative"])
def test_recurrent_attention_with_grouped_states_equals_repeated_annotations(scorer):
    torch.manual_seed(0)
    B, G, S, Ds, Dh = 2, 3, 5, 6, 8
    attn = AdditiveAttention(Ds, Dh, 7) if scorer == "additive" else MultiplicativeAttention(Ds, Dh)
    s, h = torch.randn(B * G, Ds), torch.randn(B, S, Dh)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    c, alpha = attn(s, h, mask=mask, group=G)
    rows = torch.arange(B).repeat_interleave(G)
    c_ref, alpha_ref = attn(s, h[rows], mask=mask[rows])
    torch.testing.assert_close(c, c_ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(alpha, alpha_ref, atol=1e-6, rtol=1e-5)


def test_causal_mask_with_a_cached_prefix_offsets_the_queries():
    assert causal_mask(2, n_keys=4).tolist() == [[True, True, True, False], [True, True, True, True]]
