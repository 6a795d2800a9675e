"""The heads study's own arithmetic (bench/studies/heads_study.py): each kind's share of the drops
and the importance, and how two seeds' important heads are compared by place."""

from __future__ import annotations

import pytest
from bench.studies.heads_study import by_kind, compare_seeds, places


def row(kind: str, layer: int, head: int, importance: float, drop: float) -> dict:
    return {"kind": kind, "layer": layer, "head": head, "importance": importance, "bleu_drop": drop}


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
