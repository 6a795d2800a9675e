"""Data at scale: ``attnkit prepare`` beside fairseq's preparation, and training ranks on prepared data.

    python -m bench.data_scale --corpora /tmp/corpus/c100k /tmp/corpus/c1m /tmp/corpus/c4500k \\
        --spm /tmp/corpus/spm8k.model --out bench/results/data_scale.json [--fairseq-venv DIR]

Corpora come from ``bench/make_corpus.py`` (never committed); one SentencePiece model serves every
size and both tools (the same vocabulary). Per corpus, one after the other:

1. ``attnkit prepare --workers 2`` under ``/usr/bin/time -v``: wall and CPU seconds, pairs/s, peak RSS.
2. ``bench/fairseq_prepare.py`` (SentencePiece encoding, then ``fairseq-preprocess --workers 2``) on
   the same files and model, if a fairseq venv is given (bench/PEERS.md says how to make one).
3. A 2-process training run (torchrun, gloo, one thread per rank) of a small Transformer on the
   prepared folder, 2 steps: each rank reports its peak RSS, its private (anonymous) RSS and file-
   backed RSS at the first step, and the seconds from its start to the end of its first step.

Report figures taken with nothing else running, with the load average (in the JSON) beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START = time.monotonic()  # a rank's clock starts here, before torch and attnkit are imported

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """\
data:
  corpus: files
  train_files: [{c}/train.de, {c}/train.en]
  valid_files: [{c}/valid.de, {c}/valid.en]
  prepared: {prepared}
  max_len: 128
tokenizer: {{model: [{spm}]}}
model: {{arch: transformer, d_model: 128, n_heads: 4, d_ff: 512, n_encoder_layers: 2, n_decoder_layers: 2,
         share_vocab: true, max_len: 256}}
train: {{max_steps: 2, max_tokens: 4096, log_every: 1, progress: false, warmup_steps: 10}}
valid: {{every: 1000, max_sentences: 2, keep_last: 0}}
output_dir: {out}
"""


def status_kb(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else -1


def rank_main(argv: list[str]) -> None:
    """One training rank: attnkit train in-process, its memory and time to first step written as JSON."""
    from attnkit.cli import main
    from attnkit.train import trainer

    report: dict = {"rank": int(os.environ.get("RANK", "0"))}
    step = trainer.Trainer.train_step

    def timed_step(self, batches):
        out = step(self, batches)
        if "first_step_s" not in report:
            report["first_step_s"] = round(time.monotonic() - START, 2)
            report["rss_anon_mb_first_step"] = round(status_kb("RssAnon") / 1024, 1)
            report["rss_file_mb_first_step"] = round(status_kb("RssFile") / 1024, 1)
        return out

    trainer.Trainer.train_step = timed_step  # type: ignore[method-assign]
    code = main(argv)
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    report["exit"] = code
    out = Path(os.environ["DATA_SCALE_REPORT"]) / f"rank{report['rank']}.json"
    out.write_text(json.dumps(report))
    sys.exit(code)


def timed(cmd: list[str], **kw) -> dict:
    """Run ``cmd`` under GNU time: wall and CPU seconds, peak RSS (the largest process), exit code."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        start = time.monotonic()
        proc = subprocess.run(
            ["/usr/bin/time", "-v", "-o", t.name, *cmd], capture_output=True, text=True, **kw
        )
        wall = time.monotonic() - start
        text = Path(t.name).read_text()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}): {proc.stderr[-2000:]}")

    def field(name: str) -> float:
        return float(re.search(rf"{name}: ([\d.]+)", text).group(1))  # type: ignore[union-attr]

    cpu = field("User time \\(seconds\\)") + field("System time \\(seconds\\)")
    peak = field("Maximum resident set size \\(kbytes\\)") / 1024
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(peak, 1),
        "stdout": proc.stdout,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_corpus(
    corpus: Path, spm: Path, work: Path, workers: int, fairseq_venv: str, fairseq_max: int
) -> dict:
    pairs = sum(1 for _ in open(corpus / "train.de", "rb"))
    prepared, run = work / f"prep_{corpus.name}", work / f"run_{corpus.name}"
    cfg = work / f"{corpus.name}.yaml"
    cfg.write_text(CONFIG.format(c=corpus, prepared=prepared, spm=spm, out=run))
    row: dict = {"corpus": corpus.name, "pairs": pairs, "load_before": os.getloadavg()}
    attnkit = [sys.executable, "-m", "attnkit.cli"]
    prep = timed([*attnkit, "prepare", "--config", str(cfg), "--workers", str(workers)])
    prep["pairs_per_s"] = round(pairs / prep["wall_s"])
    prep["folder_mb"] = round(sum(p.stat().st_size for p in prepared.iterdir()) / 2**20, 1)
    row["attnkit_prepare"] = prep
    if fairseq_venv and pairs <= fairseq_max:
        out = work / f"fairseq_{corpus.name}"
        js = work / f"fairseq_{corpus.name}.json"
        fs = [sys.executable, str(ROOT / "bench" / "fairseq_prepare.py"), str(corpus), str(spm)]
        subprocess.run(
            [*fs, "--out", str(out), "--venv", fairseq_venv, "--workers", str(workers), "--json", str(js)],
            check=True,
            capture_output=True,
        )
        row["fairseq"] = json.loads(js.read_text())
    reports = work / f"ranks_{corpus.name}"
    reports.mkdir(exist_ok=True)
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "-m",
        "bench.data_scale",
        "rank",
        "train",
        "--config",
        str(cfg),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DATA_SCALE_REPORT": str(reports)}
    row["train_wall_s"] = timed(torchrun, env=env, cwd=ROOT)["wall_s"]
    row["ranks"] = [json.loads((reports / f"rank{r}.json").read_text()) for r in (0, 1)]
    row["load_after"] = os.getloadavg()
    return row


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        return rank_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", nargs="+", type=Path, required=True)
    ap.add_argument(
        "--spm", type=Path, required=True, help="one SentencePiece model (ids pad 0 bos 1 eos 2 unk 3)"
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/data_scale"))
    ap.add_argument("--fairseq-venv", default="", help="a venv with fairseq installed (bench/PEERS.md)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fairseq-max-pairs", type=int, default=10**9, help="skip fairseq on larger corpora")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for corpus in args.corpora:
        fairseq = (args.fairseq_venv, args.fairseq_max_pairs)
        rows.append(one_corpus(corpus.resolve(), args.spm.resolve(), args.work, args.workers, *fairseq))
        print(json.dumps(rows[-1], indent=1), flush=True)
    from bench.report import machine_info

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    result = {"machine": machine_info("cpu"), "commit": commit.stdout.strip(), "rows": rows}
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
