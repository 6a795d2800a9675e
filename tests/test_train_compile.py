"""train.compile: the model's forward and the loss compile as one graph with no graph break, one
graph for every batch shape (no recompilation as lengths change), and train as the eager step does.

The graphs are dynamo's own whatever the backend, so the test compiles with ``aot_eager`` (dynamo and
AOT autograd, without Inductor's code generation): seconds instead of minutes on a CPU."""

from __future__ import annotations

import csv
import functools

import pytest
import torch
from torch._dynamo.utils import counters

from attnkit.train import load_config, train
from test_linear_loss import TINY as LOSS_TINY

TINY = [*LOSS_TINY, "model.dropout=0.0"]  # six batches of different lengths


def losses(tmp_path, shared_data, name: str, *extra: str) -> list[float]:
    """The logged training losses of a tiny run (six batches of different lengths)."""
    cfg = load_config(None, [f"data.data_dir={shared_data}", *TINY, f"output_dir={tmp_path / name}", *extra])
    result = train(cfg, log=lambda m: None)
    with result.metrics_csv.open() as f:
        return [float(r["train_loss"]) for r in csv.DictReader(f) if r["train_loss"]]


@pytest.fixture
def aot_eager(monkeypatch):
    """torch.compile with the aot_eager backend; dynamo's counters cleared."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    torch._dynamo.reset()
    counters.clear()
    yield counters
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["plain", "chunked"])
def test_a_compiled_step_is_one_graph_for_every_shape_and_trains_as_the_eager_one(
    tmp_path, shared_data, aot_eager, loss
):
    extra = ["train.output_loss_chunk=64"] if loss == "chunked" else []
    eager = losses(tmp_path, shared_data, "eager", *extra)
    counters.clear()
    compiled = losses(tmp_path, shared_data, "compiled", "train.compile=true", *extra)
    assert compiled == pytest.approx(eager, rel=1e-4)
    assert counters["stats"]["unique_graphs"] == 1  # six batches of different lengths, one graph
    # the chunked loss runs eagerly after the compiled forward: its one break is the loss itself
    breaks = dict(counters["graph_break"])
    assert breaks == {} if loss == "plain" else len(breaks) == 1, breaks


def test_dropout_compiles_without_a_graph_break(aot_eager):
    """attnkit.fast's CPU dropout draws with random_, which dynamo cannot trace; under the compiler
    the compiler's own dropout draws instead."""
    from attnkit import fast

    layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).train()
    with fast.fast_dropout(layer):
        step = torch.compile(lambda x: layer(x).sum(), fullgraph=True, dynamic=True)
        step(torch.ones(4, 8)).backward()
    assert dict(counters["graph_break"]) == {}
