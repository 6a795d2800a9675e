"""The site's tutorials (docs/tutorials/plot_*.py) run on their own and print the numbers the seeds
print (seed 000 and 001); the one that trains shows both models learned."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from seed_numbers import SEEDS

ROOT = Path(__file__).resolve().parents[1]

TUTORIALS = ROOT / "docs" / "tutorials"


def run(name: str) -> dict[str, list[float]]:
    """Run one tutorial as a script (figures off screen); its ``name: v1 v2 ...`` lines, read back.
    (The tutorials that train are checked on the site build's output: tests/test_docs_site.py.)"""
    scratch = Path(tempfile.mkdtemp())  # the tutorial's temporary files go here, and must go
    here = Path(tempfile.mkdtemp())  # where it is run: headless, its figures are saved here
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, str(TUTORIALS / name)],
        capture_output=True,
        text=True,
        env={**env, "TMPDIR": str(scratch)},
        cwd=here,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    left = [p.name for p in scratch.iterdir()]
    drawn = sorted(p.name for p in here.iterdir())
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(here, ignore_errors=True)
    assert not left, f"{name} left {left} in its temporary folder"
    number = name.split("_")[1]  # plot_01_... -> 01: each figure it showed, saved and named
    assert drawn and all(d.startswith(f"tutorial_{number}_") and d.endswith(".png") for d in drawn), drawn
    assert all(f"saved the figure as {d}" in proc.stdout for d in drawn), proc.stdout
    return numbers(proc.stdout)


def numbers(text: str) -> dict[str, list[float]]:
    """The ``name: v1 v2 ...`` lines of a tutorial's output."""
    printed = {}
    for line in text.splitlines():
        key, sep, rest = line.strip().partition(": ")
        if sep and " " not in key:
            try:
                printed[key] = [float(v) for v in rest.split()]
            except ValueError:
                continue
    return printed


@pytest.fixture(scope="module")
def printed() -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for name in ("plot_01_self_attention_by_hand.py", "plot_02_multihead_attention_and_masks.py"):
        found.update(run(name))
    return {**found, **run("plot_03_positional_encoding.py")}


@pytest.mark.parametrize("name", sorted(SEEDS))
@pytest.mark.slow
def test_printed_numbers_match_the_seeds(printed, name):
    got, want = printed[name], SEEDS[name]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        # 4 printed decimals (the seed truncates PE, so allow one unit in the last place), or 0.1% relative
        assert abs(g - w) <= max(1.5e-4, 1e-3 * abs(w)), (name, got, want)


@pytest.mark.slow
def test_rotation_check_and_saturation_are_reported(printed):
    for k in (1, 5, 20):
        assert printed[f"rotation_error_k{k}"][0] < 1e-5
    assert printed["max_gradient_s2"][0] < 1e-3 < printed["max_gradient_s1"][0]


def test_every_tutorial_is_a_gallery_script_with_a_title():
    scripts = sorted(TUTORIALS.glob("plot_*.py"))
    assert len(scripts) >= 4
    for script in scripts:
        lines = script.read_text(encoding="utf-8").splitlines()
        assert lines[0] == '"""' and set(lines[2]) == {"="} and len(lines[2]) == len(lines[1]), script.name
