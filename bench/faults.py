"""Run the fault suite (tests/test_faults*.py and tests/test_guarantees.py) and count its cases: how
many are handled, per file.

    PYTHONPATH=src python -m bench.faults            # prints a Markdown table for docs/BENCHMARKS.md

A case is *handled* when its test passes: the fault or bad input ends in the documented behaviour
(a one-line error and exit 2, or the work done right, with nothing lost and no stray file). Skipped
cases (e.g. the real full disk, which needs root to mount a tmpfs) are listed with their reason.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    found = [*(ROOT / "tests").glob("test_faults*.py"), ROOT / "tests" / "test_guarantees.py"]
    files = sorted(str(p.relative_to(ROOT)) for p in found)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "faults.xml"
        t0 = time.monotonic()
        # -n 0: in one process, so the wall-clock time compares with earlier runs
        cmd = [sys.executable, "-m", "pytest", *files, "-q", "-n", "0", "-p", "no:warnings"]
        cmd.append(f"--junitxml={report}")
        done = subprocess.run(cmd, cwd=ROOT)
        seconds = time.monotonic() - t0
        cases = ET.parse(report).getroot().iter("testcase")
        counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        skipped, failed = [], []
        for case in cases:
            where = case.get("classname", "").rsplit(".", 1)[-1]
            if case.find("skipped") is not None:
                outcome = "skipped"
                skipped.append(f"{where}::{case.get('name')}: {case.find('skipped').get('message')}")
            elif case.find("failure") is not None or case.find("error") is not None:
                outcome = "failed"
                failed.append(f"{where}::{case.get('name')}")
            else:
                outcome = "handled"
            counts[where][outcome] += 1
    total = collections.Counter()
    print("\n| file | cases | handled | skipped | not handled |\n|---|---:|---:|---:|---:|")
    for where, c in sorted(counts.items()):
        total.update(c)
        print(f"| {where}.py | {sum(c.values())} | {c['handled']} | {c['skipped']} | {c['failed']} |")
    print(
        f"| **all** | {sum(total.values())} | {total['handled']} | {total['skipped']} | {total['failed']} |"
    )
    print(f"\n{sum(total.values())} cases, {total['handled']} handled, in {seconds:.0f} s wall-clock.")
    for line in skipped:
        print(f"skipped: {line}")
    for line in failed:
        print(f"NOT HANDLED: {line}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
