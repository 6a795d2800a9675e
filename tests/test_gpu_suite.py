"""bench/gpu_suite.py proven on the CPU before any GPU minute is spent: ``--smoke`` runs every part at
toy sizes, each in a process of its own, and a part that sleeps past its time box is killed while the
suite goes on. Both suites run as real processes, side by side (the stalled one mostly sleeps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ["train_base", "train_big", "attention", "decode", "train_multi30k", "train_fp16", "nccl"]
STATUSES = {"ok", "timed_out", "failed", "skipped"}
THROUGHPUT = {  # one rate per part's row, > 0 where the part ran
    "train_base": "tokens_per_s",
    "train_big": "tokens_per_s",
    "attention": "fwd_bwd_tokens_per_s",
    "decode": "greedy",
    "train_multi30k": "tokens_per_s",
    "train_fp16": "seconds",
}


def start_suite(out: Path, *flags: str) -> subprocess.Popen:
    # Multi30k where the tests find it; without it the smoke trains on a synthetic corpus
    data = os.environ.get("ATTNKIT_DATA") or str(ROOT.parent / "shared" / "data")
    cmd = [sys.executable, "-m", "bench.gpu_suite", "--out", str(out), "--smoke", "--data-dir", data, *flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # two runs side by side beside the suite: threads contend
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(proc: subprocess.Popen, out: Path) -> tuple[dict, str]:
    try:
        # a hang's guard, not a speed test: the parts' own boxes bound each; on a shared 2-core host
        # beside the suite's other worker the whole smoke run takes 150-200 s
        log, _ = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        proc.kill()
        log, _ = proc.communicate()
        pytest.fail(f"the smoke suite ran past 400 s:\n{log[-3000:]}")
    assert proc.returncode == 0, log[-3000:]
    assert (out / "gpu_suite.json").is_file() and (out / "gpu_suite.md").is_file(), log[-3000:]
    return json.loads((out / "gpu_suite.json").read_text()), (out / "gpu_suite.md").read_text()


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    """(full smoke run, run whose train_base sleeps past a 2-second box), each as (json, markdown)."""
    root = tmp_path_factory.mktemp("gpu_suite")
    stalled = start_suite(
        root / "stalled", "--parts", "train_base,attention", "--stall", "train_base", "--box", "train_base=2"
    )
    full = start_suite(root / "full")
    return finish(full, root / "full"), finish(stalled, root / "stalled")


@pytest.mark.slow
def test_smoke_writes_every_part_with_a_status_to_json_and_markdown(suites):
    (results, md), _ = suites
    assert results["mode"] == "smoke" and list(results["parts"]) == PARTS
    for name, part in results["parts"].items():
        assert part["status"] in STATUSES, (name, part)
        assert f"| {name} | {part['status']} |" in md  # the summary table names every part
    env = results["environment"]
    assert env["torch"] and "attnkit_commit" in env and env["device"] == "cpu"


def test_smoke_parts_run_and_report_positive_rates(suites):
    (results, md), _ = suites
    parts = results["parts"]
    for name, key in THROUGHPUT.items():
        assert parts[name]["status"] == "ok", (name, parts[name].get("error"))
        rows = [r for r in parts[name]["result"]["rows"] if r.get("status", "ok") == "ok"]
        assert rows and all(r[key] > 0 for r in rows), (name, rows)
        assert f"## {name}" in md
    assert parts["nccl"]["status"] == "skipped" and "NCCL" in parts["nccl"]["reason"]
    engines = {r["engine"] for r in parts["train_base"]["result"]["rows"]}
    chunked = "attnkit train.compile (aot_eager, output_loss_chunk 4096)"
    assert {"attnkit eager", "attnkit train.compile (aot_eager)", chunked} <= engines
    for row in parts["train_base"]["result"]["rows"]:  # the trainer's step: one graph, no break
        if row["engine"] == "attnkit train.compile (aot_eager)":
            assert row["graphs"] == 1 and row["graph_breaks"] == 0, row
    static = [r for r in parts["decode"]["result"]["rows"] if r["engine"].startswith("attnkit fixed")]
    assert len(static) == 2  # both models; on the CPU the fixed layout eagerly, no compile
    assert all(r["greedy same"] == 1.0 and r["beam 4 same"] == 1.0 and r["score gap"] < 1e-4 for r in static)
    assert parts["train_multi30k"]["result"]["rows"][0]["bleu"] >= 0


def test_a_part_past_its_box_is_killed_and_the_next_one_still_runs(suites):
    _, (results, md) = suites
    parts = results["parts"]
    assert parts["train_base"]["status"] == "timed_out" and "2 s box" in parts["train_base"]["error"]
    assert parts["train_base"]["seconds"] < 30  # killed at the box, not at the end of its sleep
    assert parts["attention"]["status"] == "ok"
    assert all(r["fwd_bwd_tokens_per_s"] > 0 for r in parts["attention"]["result"]["rows"])
    assert {parts[n]["status"] for n in ("train_big", "decode", "train_multi30k", "nccl")} == {"skipped"}
    assert "| train_base | timed_out |" in md
