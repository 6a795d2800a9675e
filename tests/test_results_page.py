"""The results page says what is true now, briefly: every raw file it cites is in bench/results, every
file there is cited (superseded ones live in git), it stays under 400 lines, and the README, the
front door, under 150."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "BENCHMARKS.md"


def expand(name: str) -> list[str]:
    """``a_{x,y}.{json,md}`` -> a_x.json, a_x.md, a_y.json, a_y.md."""
    parts = re.split(r"\{([^}]*)\}", name)
    fixed, choices = parts[0::2], [p.split(",") for p in parts[1::2]]
    return [
        "".join(f + c for f, c in itertools.zip_longest(fixed, combo, fillvalue=""))
        for combo in itertools.product(*choices)
    ]


def cited() -> set[str]:
    names = re.findall(r"bench/results/([\w.{},-]*[\w}])", PAGE.read_text(encoding="utf-8"))
    return {n for name in names for n in expand(name)}


def test_every_cited_raw_file_exists_and_every_raw_file_is_cited():
    files = {p.name for p in (ROOT / "bench" / "results").iterdir()}
    assert sorted(cited() - files) == [], "cited but missing"
    assert sorted(files - cited()) == [], "in bench/results but cited nowhere on the results page"


def test_the_results_page_and_the_readme_stay_short():
    assert len(PAGE.read_text(encoding="utf-8").splitlines()) <= 400
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150
