"""How attention flows through the layers: rollout and flow (Abnar and Zuidema, 2020).

An upper layer attends over positions that the layers below have already mixed, so its raw weights
say little about which *inputs* a position used. Both methods follow the mixing down to the input
tokens, counting the residual connection as the paper does: each layer's attention, averaged over
its heads, becomes A~ = 0.5 A + 0.5 I (each row still sums to 1).

- rollout: R = A~_L ... A~_1; row i holds each input token's share in position i at the top.
- flow: the layers as a graph, A~'s weights as edge capacities; entry (i, j) is the largest flow
  from position i at the top to input token j at the bottom (SciPy's maximum flow, on capacities
  in units of 2^-20), each row then normalised to sum to 1.

Legend: L layers, H heads, S positions, T target positions.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from scipy.sparse import csr_matrix  # type: ignore[import-untyped]
from scipy.sparse.csgraph import maximum_flow  # type: ignore[import-untyped]
from torch import Tensor

FLOW_SLOW = 64  # positions: beyond, S^2 maximum flows take seconds to minutes
UNIT = 1 << 20  # capacities are integers for SciPy: weights in steps of 2^-20 (~1e-6)


def with_residual(weights: Tensor) -> Tensor:
    """(L, H, S, S) attention -> (L, S, S): mean over heads, half of each row kept for the residual."""
    mean = weights.float().mean(1)  # (L, S, S)
    eye = torch.eye(mean.size(-1), device=mean.device)
    mixed = 0.5 * mean + 0.5 * eye
    return mixed / mixed.sum(-1, keepdim=True)


def rollout(weights: Tensor) -> Tensor:
    """(L, H, S, S) self-attention of one sequence -> (S, S): each top position's mix of inputs."""
    layers = with_residual(weights)
    result = layers[0]
    for layer in layers[1:]:
        result = layer @ result  # (S, S): the upper layer reads what the lower one mixed
    return result


def flow(weights: Tensor) -> Tensor:
    """(L, H, S, S) self-attention of one sequence -> (S, S): the maximum flow from each top position
    to each input token through the layers, rows normalised."""
    layers = with_residual(weights).double().cpu().numpy()  # (L, S, S)
    L, S, _ = layers.shape
    if S > FLOW_SLOW:
        warnings.warn(
            f"attention flow over {S} positions: {S * S} maximum flows, which takes a while", stacklevel=2
        )
    i, j = np.meshgrid(np.arange(S), np.arange(S), indexing="ij")  # (S, S) each
    # node level * S + i is position i after ``level`` layers; edge (level + 1, i) -> (level, j)
    # carries A~_level[i, j]
    heads = np.concatenate([((level + 1) * S + i).ravel() for level in range(L)])
    tails = np.concatenate([(level * S + j).ravel() for level in range(L)])
    capacity = np.rint(layers * UNIT).astype(np.int32).ravel()
    graph = csr_matrix((capacity, (heads, tails)), shape=((L + 1) * S, (L + 1) * S))
    result = torch.zeros(S, S, dtype=torch.float64)
    for top in range(S):
        for bottom in range(S):
            result[top, bottom] = maximum_flow(graph, L * S + top, bottom).flow_value
    return (result / result.sum(-1, keepdim=True).clamp_min(1)).float()


def mixing(weights: Tensor, method: str) -> Tensor:
    """(L, H, S, S) self-attention -> (S, S) by ``method``: rollout, flow, or (raw) the last layer's
    mean over heads. Causal (a language model's) or not alike."""
    if method == "raw":
        return weights[-1].float().mean(0)
    return rollout(weights) if method == "rollout" else flow(weights)


def through_encoder(cross: Tensor, encoder_self: Tensor, method: str) -> Tensor:
    """The decoder's view of the source tokens: the last layer's cross-attention (L, H, T, S),
    averaged over its heads, followed down through the encoder's rollout or flow -> (T, S);
    ``raw``: the last layer's cross-attention itself."""
    if method == "raw":
        return cross[-1].float().mean(0)
    return through(cross, mixing(encoder_self, method))


def through(cross: Tensor, encoder_mixing: Tensor) -> Tensor:
    """The last cross-attention layer (L, H, T, S), mean of its heads, through an encoder mixing
    (S, S) already computed (:func:`mixing`) -> (T, S)."""
    last = cross[-1].float().mean(0)  # (T, S)
    return last @ encoder_mixing.to(last.device)
