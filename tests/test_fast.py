"""attnkit.fast: each speed-up equals the readable version it replaces.

Dropout masks cut from 64-bit draws have nn.Dropout's distribution and gradient; packed linear layers give
nn.Linear's outputs (and never stale weights); the fused loss trains a model exactly as the readable one.
"""

import pytest
import torch
from torch import nn

from attnkit import fast, loss
from attnkit.decoding import beam_search, greedy_search
from attnkit.fast import dropout
from helpers import make_model, random_tokens


def test_keeps_one_minus_p_and_preserves_the_mean():
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = dropout(x, 0.1)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - 0.1) < 0.003  # binomial std ~ 0.0005
    kept = y[y != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / 0.9))
    assert abs(y.mean().item() - 1.0) < 0.01


def test_each_piece_of_a_draw_keeps_one_minus_p_and_bf16_stays_bf16():
    # Four masks share one 64-bit draw; the draw's top bit is always 0, so a piece that used it would
    # keep (or drop) too often: check the four positions of a draw one by one.
    torch.manual_seed(0)
    y = dropout(torch.ones(4 * 100_000), 0.5).view(-1, 4)  # (draws, 4 pieces)
    for piece in range(4):
        assert abs((y[:, piece] == 0).float().mean().item() - 0.5) < 0.006  # binomial std ~ 0.0016
    z = dropout(torch.ones(1000, dtype=torch.bfloat16), 0.3)
    values = z.unique().tolist()
    assert z.dtype == torch.bfloat16 and len(values) == 2 and values[0] == 0.0
    assert values[1] == pytest.approx(1 / 0.7, rel=1e-2)


def test_gradient_is_the_forward_mask():
    torch.manual_seed(0)
    x = torch.randn(8, 16, requires_grad=True)
    y = dropout(x, 0.3)
    y.backward(torch.ones_like(y))
    mask = (y != 0).float() / 0.7
    torch.testing.assert_close(x.grad, mask)


def test_eval_mode_and_p_zero_are_identity_and_p_one_drops_all():
    x = torch.randn(4, 5)
    module = nn.Dropout(0.5).eval()
    with fast.fast_dropout(module):
        assert module(x) is x
    assert dropout(x, 0.0) is x
    assert torch.all(dropout(x, 1.0) == 0)
    with pytest.raises(ValueError, match="dropout probability"):
        dropout(x, 1.5)


def test_seeded_runs_repeat():
    x = torch.randn(32, 32)
    torch.manual_seed(7)
    a = dropout(x, 0.2)
    torch.manual_seed(7)
    b = dropout(x, 0.2)
    assert torch.equal(a, b)


def test_fast_dropout_patches_every_dropout_for_the_block_only():
    model = make_model("transformer", dropout=0.3).train()
    x, y = random_tokens(4, 6), random_tokens(4, 5)
    with fast.fast_dropout(model):
        torch.manual_seed(3)
        a = model(x, y)
        dropouts = [m for m in model.modules() if type(m) is nn.Dropout]
        assert dropouts and all("forward" in m.__dict__ for m in dropouts)
    assert all("forward" not in m.__dict__ for m in dropouts)
    torch.manual_seed(3)
    expected_drop = (torch.rand(4, 5, model.config.d_model) < 0.3).float().mean()  # same rate, any mask
    assert 0.2 < expected_drop < 0.4 and torch.isfinite(a).all()


@pytest.mark.parametrize("kind", ["transformer", "transformer-pre", "rnn"])
def test_packed_linears_decode_exactly_as_plain_linears(kind):
    model = make_model(kind)
    src = random_tokens(3, 7, seed=4)
    plain_greedy = greedy_search(model, src)
    plain_beam = beam_search(model, src, beam_size=3, nbest=2)
    with fast.packed_linears(model):
        assert any("forward" in m.__dict__ for m in model.modules()) or not fast._PACKING
        packed_greedy = greedy_search(model, src)
        packed_beam = beam_search(model, src, beam_size=3, nbest=2)
        logits = model(src, random_tokens(3, 4))
    assert all("forward" not in m.__dict__ for m in model.modules())
    assert [h.tokens for h in packed_greedy] == [h.tokens for h in plain_greedy]
    for p, q in zip(packed_beam, plain_beam):
        assert [h.tokens for h in p] == [h.tokens for h in q]
        assert [h.score for h in p] == pytest.approx([h.score for h in q], abs=1e-4)
    torch.testing.assert_close(logits, model(src, random_tokens(3, 4)), atol=1e-5, rtol=1e-5)


def test_only_products_big_enough_run_packed_and_they_equal_plain_ones():
    """Small decoding products skip packing (its per-call cost outweighs it); the vocabulary
    projection and large batches pack, with the plain product's values."""
    assert fast.packs(4, 4000, 128) and fast.packs(512, 128, 128) and fast.packs(64, 1024, 128)
    assert fast.packs(8, 256, 1024)  # a d_ff-1024 feed-forward's second matrix, at any row count
    assert not fast.packs(4, 128, 128) and not fast.packs(64, 512, 128) and not fast.packs(256, 128, 512)
    assert not fast.packs(8, 256, 512)
    torch.manual_seed(0)
    layer = nn.Linear(16, 1024)
    x = torch.randn(3, 1, 16)  # one decoding step of 3 rows
    with torch.no_grad(), fast.packed_linears(layer):
        packed = layer(x)
    torch.testing.assert_close(
        packed, nn.functional.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5
    )
    wide_in = nn.Linear(1024, 64)  # a feed-forward's second matrix: packed through its input width
    x = torch.randn(8, 1, 1024)
    with torch.no_grad(), fast.packed_linears(wide_in):
        packed = wide_in(x)
    torch.testing.assert_close(
        packed, nn.functional.linear(x, wide_in.weight, wide_in.bias), atol=1e-4, rtol=1e-4
    )


def test_a_weight_is_packed_only_when_a_product_needs_it(monkeypatch):
    # One translate() call of one sentence enters the block once: packing all of a model's weights
    # there cost more than the decoding (27 reorders for the one the vocabulary projection needs).
    if not fast._PACKING:
        pytest.skip("no oneDNN packing on this build")
    reorders = []
    real = torch.ops.mkldnn._reorder_linear_weight
    monkeypatch.setattr(
        fast.torch.ops.mkldnn,
        "_reorder_linear_weight",
        lambda w, rows: reorders.append(w.shape) or real(w, rows),
    )
    model = make_model("transformer", src_vocab_size=1024, tgt_vocab_size=1024)
    with torch.no_grad(), fast.packed_linears(model):
        hyps = greedy_search(model, random_tokens(4, 5), max_len_b=4)
        greedy_search(model, random_tokens(4, 5), max_len_b=4)  # the same block: no second reorder
    assert reorders == [model.output_proj.weight.shape]
    assert [h.tokens for h in hyps] == [
        h.tokens for h in greedy_search(model, random_tokens(4, 5), max_len_b=4)
    ]


def test_packed_weights_follow_optimizer_updates():
    """Inference after a (fused) optimizer step must use the new weights: packing is per block."""
    torch.manual_seed(0)
    layer = nn.Linear(16, 32)
    opt = torch.optim.Adam(layer.parameters(), lr=0.1, fused=True)
    x = torch.randn(5, 16)
    for _ in range(2):
        with torch.no_grad(), fast.packed_linears(layer):
            packed = layer(x)
        torch.testing.assert_close(
            packed, nn.functional.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5
        )
        layer(x).sum().backward()
        opt.step()


def test_training_with_the_fast_edges_equals_the_readable_path():
    """Three SGD steps with the fused loss give the weights the readable loss gives (SGD is linear in
    the gradient; Adam would magnify rounding in near-zero gradients)."""

    def run(use_fast: bool):
        model = make_model("transformer").train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        src, tgt = random_tokens(4, 6, seed=5), random_tokens(4, 6, seed=6)
        ls_ce = fast.label_smoothed_cross_entropy if use_fast else loss.label_smoothed_cross_entropy
        for _ in range(3):
            out = ls_ce(model(src, tgt[:, :-1]), tgt[:, 1:], epsilon=0.1, pad_id=0)
            out.loss.backward()
            opt.step()
            opt.zero_grad()
        return model.state_dict()

    a, b = run(True), run(False)
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)
