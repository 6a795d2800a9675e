"""The one weight table every converter uses, and the feature permutation between attnkit's and
Marian's sinusoid layouts. Needs no optional package."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.export.huggingface import marian_feature_order, residual_axis
from attnkit.export.weights import attnkit_state_dict, logical_weights, name_table
from attnkit.model import Transformer, TransformerConfig
from attnkit.positional import sinusoidal_encoding

CONFIGS = [
    {},
    {"share_vocab": True},
    {"tie_output": False},
    {"output_bias": True},
    {"positional": "learned", "share_vocab": True},
    {"bias": False, "norm": "pre"},
]


@pytest.mark.parametrize(
    "overrides", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default"
)
def test_logical_weights_round_trip_every_parameter(overrides):
    torch.manual_seed(0)
    cfg = TransformerConfig.preset("tiny", **overrides)
    model = Transformer(cfg)
    for p in model.parameters():
        p.data.normal_()
    logical = logical_weights(model)
    assert logical["src_positions"].shape == (cfg.max_len, cfg.d_model)
    back = Transformer(cfg)
    back.load_state_dict(attnkit_state_dict(logical, cfg), strict=True)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, back.state_dict()[name]), name


def test_the_table_covers_every_parameter_and_only_those():
    cfg = TransformerConfig.preset("tiny", tie_output=False)
    names = {attnkit for _, attnkit, _ in name_table(cfg)}
    assert names == set(Transformer(cfg).state_dict())


def test_marian_feature_order_maps_attnkit_sinusoids_onto_marians():
    d, n = 16, 10
    ours = sinusoidal_encoding(n, d)  # (T, D): sin at even features, cos at odd ones
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = torch.tensor([1 / math.pow(10000, 2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    marian = torch.cat(
        [torch.sin(pos * freq), torch.cos(pos * freq)], dim=1
    ).float()  # all sines, then cosines
    assert torch.allclose(ours[:, marian_feature_order(d)], marian, atol=1e-6)


def test_every_logical_weight_has_a_residual_axis_rule():
    cfg = TransformerConfig.preset("tiny", tie_output=False)
    for logical in logical_weights(Transformer(cfg)):
        if not logical.endswith("_positions"):
            residual_axis(logical)  # raises KeyError for a name it does not know
