"""Attention rollout and flow (Abnar and Zuidema, 2020): the residual counted as half of each row,
rollout the product of the layers, flow the maximum flow through them."""

from __future__ import annotations

import torch

from attnkit.attention.rollout import flow, rollout, through_encoder, with_residual


def attention(L: int, H: int, S: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(L, H, S, S, generator=g), dim=-1)  # (L, H, S, S)


def test_the_residual_is_half_of_each_row_and_rows_still_sum_to_one():
    w = attention(2, 3, 5)
    mixed = with_residual(w)
    torch.testing.assert_close(mixed, 0.5 * w.mean(1) + 0.5 * torch.eye(5))
    torch.testing.assert_close(mixed.sum(-1), torch.ones(2, 5))


def test_rollout_is_the_product_of_the_layers_top_first():
    w = attention(3, 2, 4)
    m = with_residual(w)
    torch.testing.assert_close(rollout(w), m[2] @ m[1] @ m[0])
    torch.testing.assert_close(rollout(w[:1]), m[0])
    eye = torch.eye(4).expand(2, 2, 4, 4)  # every position attends to itself: nothing mixes
    torch.testing.assert_close(rollout(eye), torch.eye(4))


def test_flow_through_one_layer_is_its_weights_and_through_two_the_sum_of_path_bottlenecks():
    w = attention(1, 2, 4)
    torch.testing.assert_close(flow(w), with_residual(w)[0])
    w = attention(2, 2, 4, seed=1)
    m = with_residual(w).double()
    # from top position i to input j each path passes one middle position k, on edges of its own
    by_hand = torch.minimum(m[1][:, :, None], m[0][None, :, :]).sum(1)  # (S, S): sum_k min(.)
    torch.testing.assert_close(flow(w), (by_hand / by_hand.sum(-1, keepdim=True)).float())


def test_the_decoder_view_follows_the_last_cross_layer_through_the_encoder():
    cross = attention(2, 4, 6)[:, :, :3, :]  # (L, H, T=3, S=6), rows of a softmax over 6
    cross = cross / cross.sum(-1, keepdim=True)
    encoder = attention(2, 4, 6, seed=2)
    torch.testing.assert_close(through_encoder(cross, encoder, "raw"), cross[-1].mean(0))
    view = through_encoder(cross, encoder, "rollout")
    torch.testing.assert_close(view, cross[-1].mean(0) @ rollout(encoder))
    torch.testing.assert_close(view.sum(-1), torch.ones(3))
