"""The reading path (docs/READING.md, "the paper in N files"): every file it lists exists, its line
count is the one stated (within a tenth, so a small edit does not break it), and the whole path stays
under 3,000 lines; the README points to it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 3000
ROW = re.compile(r"^\| (\d+) \| \[`([^`]+)`\]\(\.\./src/attnkit/([^)]+)\) \| (\d[\d,]*) \|")


def rows() -> list[tuple[int, str, int]]:
    found = []
    for line in (ROOT / "docs" / "READING.md").read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(2) == m.group(3), line  # the name shown is the file linked
            found.append((int(m.group(1)), m.group(2), int(m.group(4).replace(",", ""))))
    return found


def test_the_reading_path_lists_existing_files_with_their_line_counts_under_the_budget():
    listed = rows()
    assert [n for n, _, _ in listed] == list(range(1, len(listed) + 1)) and len(listed) >= 10
    total = 0
    for _, name, stated in listed:
        path = ROOT / "src" / "attnkit" / name
        assert path.is_file(), name
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert abs(lines - stated) <= max(5, stated // 10), f"{name}: {lines} lines, READING.md says {stated}"
        total += lines
    assert total < BUDGET, total
    heading = (ROOT / "docs" / "READING.md").read_text(encoding="utf-8").splitlines()[0]
    assert heading == f"# The paper in {len(listed)} files"


def test_the_readme_points_to_the_reading_path():
    assert "docs/READING.md" in (ROOT / "README.md").read_text(encoding="utf-8")
