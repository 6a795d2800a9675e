"""The site's tutorials (docs/tutorials/plot_*.py) run on their own and print the numbers the seeds
print (seed 000 and 001); the one that trains shows both models learned."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from seed_numbers import SEEDS

ROOT = Path(__file__).resolve().parents[1]

TUTORIALS = ROOT / "docs" / "tutorials"


def run(name: str) -> dict[str, list[float]]:
    """Run one tutorial as a script (figures off screen); its ``name: v1 v2 ...`` lines, read back."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, str(TUTORIALS / name)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    printed = {}
    for line in proc.stdout.splitlines():
        key, sep, rest = line.partition(": ")
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


@pytest.mark.slow
def test_the_classifier_is_right_and_its_weights_lean_to_the_deciding_word():
    printed = run("plot_05_a_classifier_says_which_words_decided.py")
    assert printed["accuracy"][0] >= 0.95
    # more than an even share, the largest weight there far above chance (1 word in about 7)
    assert printed["weight_on_deciding_word"][0] > 1.2 * printed["weight_if_even"][0]
    assert printed["deciding_word_weighted_most"][0] >= 0.4


@pytest.mark.slow
def test_the_language_model_copies_by_looking_back():
    printed = run("plot_06_a_language_model_from_the_same_blocks.py")
    assert printed["first_half_accuracy"][0] <= 0.2  # nothing to know: chance is 1/16
    assert printed["second_half_accuracy"][0] >= 0.95
    assert printed["generated_tokens"] == printed["prompt_tokens"]
    assert printed["look_back_weight_best_head"][0] >= 0.5 > printed["look_back_weight_mean_head"][0]
