"""The heads study's own arithmetic (bench/studies/heads_study.py): where the greedy curve first
leaves the tolerance, each kind's share, and how two seeds' important heads are compared by place."""

from __future__ import annotations

import pytest
from bench.studies.heads_study import by_kind, compare_seeds, first_crossing, places


def row(kind: str, layer: int, head: int, importance: float, drop: float) -> dict:
    return {"kind": kind, "layer": layer, "head": head, "importance": importance, "bleu_drop": drop}


def test_the_prunable_share_ends_where_the_curve_first_leaves_the_tolerance():
    curve = [
        {"pruned": 0, "fraction": 0.0, "bleu": 30.0},
        {"pruned": 1, "fraction": 0.25, "bleu": 30.2},
        {"pruned": 2, "fraction": 0.5, "bleu": 29.6},
        {"pruned": 3, "fraction": 0.75, "bleu": 29.4},  # past 0.5 below: the end
        {"pruned": 4, "fraction": 1.0, "bleu": 29.9},  # back within, but after the crossing
    ]
    assert first_crossing(curve, "bleu", 0.5)["pruned"] == 2
    assert first_crossing(curve[:1], "bleu", 0.5)["pruned"] == 0


def test_kinds_and_seeds_are_compared_by_place_not_by_head_number():
    a = [row("encoder", 1, 1, 0.1, 0.5), row("encoder", 1, 2, 0.3, 1.5), row("cross", 1, 1, 0.6, 3.0)]
    a.append(row("cross", 1, 2, 0.0, 0.0))
    kinds = by_kind(a, "bleu")
    assert kinds["cross"] == {"heads": 2, "mean_drop": 1.5, "max_drop": 3.0, "importance_share": 0.6}
    assert kinds["encoder"]["importance_share"] == pytest.approx(0.4)
    assert places(a, 2) == {("cross", 1): 1, ("encoder", 1): 1}
    # the same places with the heads renumbered inside their layers: the same answer
    b = [dict(r, head=3 - r["head"]) for r in a]
    seeds = compare_seeds({"heads": a, "kinds": kinds}, {"heads": b, "kinds": by_kind(b, "bleu")})
    assert seeds["top"] == 1 and seeds["top_places_shared"] == 1
    assert seeds["most_sensitive_kind"] == ["cross", "cross"]
