"""One prepared GPU run of at most 8 minutes: seven parts, each time-boxed in its own process.

    python -m bench.gpu_suite --out DIR [--device cuda] [--data-dir ../shared/data] [--checkpoint CKPT]
                              [--parts train_base,attention,...] [--box PART=SECONDS ...]
    python -m bench.gpu_suite --out /tmp/gpu_smoke --smoke      # every part on the CPU at toy sizes

Parts (bench/gpu_train_speed.py, gpu_parts.py, gpu_train.py; the time box on the GPU in seconds, 480 in all):
  train_base (100)      training target tokens/s and MFU of the paper's base model (d 512, 6+6 layers,
                        8 heads, FFN 2048, shared vocabulary 37,000, 500 x 50 = 25,000 target tokens a
                        batch, halved on CUDA OOM), bf16 autocast: attnkit eager, HF MarianMTModel of
                        the same size, and attnkit's step as train.compile runs it (forward and loss
                        one graph), with the plain loss and with train.output_loss_chunk 4096; MFU
                        against the datasheet's dense BF16 peak (H100 SXM and H200 989.4 TFLOPS, H100
                        PCIe 756), else "unknown peak"
  train_big (90)        the same for the paper's big model (d 1024, 16 heads, FFN 4096), plain loss
  attention (15)        MultiHeadAttention at T = 512 ... 8192 with B x T = 16,384 tokens: the fused
                        kernel against the reference math (need_weights=True), forward and forward +
                        backward, time and peak memory; "oom" where the reference runs out
  decode (60)           greedy and beam 4 sentences/s (30 tokens each, EOS masked) of the main job's
                        model (configs/multi30k_de_en_tiny.yaml, random init or --checkpoint) and of
                        the base model: attnkit eager, what `translate --compile` runs (the model's
                        fixed-layout step through decoding/compiled.py, CUDA graphs) and HF generate
  train_multi30k (140)  configs/multi30k_de_en_best.yaml trained by attnkit's trainer for 1.75 minutes
                        (train.max_minutes), then its test_2016_flickr BLEU with beam 4
  train_fp16 (65)       train.precision=fp16 (loss scaling) beside bf16 on the main job's config for
                        200 steps each, and fp16's resume (100 + 100 against 200 straight)
  nccl (10)             an all-reduce across two GPUs; skipped ("one GPU") on a machine with one

Each part runs as ``python -m bench.gpu_suite --part NAME`` in a process group of its own, killed at
its box: its status is ok, timed_out (with what it had measured), failed (with the error's line) or
skipped (with why), and the suite always goes on. DIR/gpu_suite.json and DIR/gpu_suite.md are
rewritten as each part ends, so a killed suite still leaves the parts before; DIR/gpu_suite.log
holds every part's output. Run folders and checkpoints go to a temporary folder, never into DIR.
``--smoke --device cuda`` runs the toy sizes on the GPU (half a minute, a first check there).

The GPU run (bench/README.md "GPU run"): the device tool sends the checkout alone (../shared stays
behind) and with uncommitted changes, so the corpus goes into an ignored ``gpu_data/`` and a ``git
archive`` of the commit into an ignored ``gpu_tree/``; one device call with carry ["gpu_data",
"gpu_tree"] and timeout_s 600 (the boxes allow 480 s):
``cd gpu_tree && ATTNKIT_COMMIT=<commit> PYTHONPATH=src python3 -m bench.gpu_suite --out $OUT/gpu
--device cuda --data-dir ../gpu_data`` ($ATTNKIT_COMMIT: the copy there has no .git of its own).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import torch

from attnkit.files import atomic_write

from . import gpu_parts, gpu_train, gpu_train_speed
from .gpu_parts import GPU, ROOT, SMOKE, Context, Part
from .report import machine_info, md_table

PARTS: dict[str, Part] = {  # in the order they run; boxes add to 480 s
    **gpu_train_speed.PARTS,
    **gpu_parts.PARTS,
    **gpu_train.PARTS,
}
SMOKE_BOX = 120  # seconds per part in --smoke: a guard, never reached by a working part


def git_commit() -> str | None:
    """$ATTNKIT_COMMIT when set (a device machine's copy of the tree may carry a stale ``.git``), else
    git's commit (``+dirty`` with uncommitted changes to tracked files), else None."""
    if commit := os.environ.get("ATTNKIT_COMMIT"):
        return commit
    try:
        run = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10)  # noqa: E731
        head = run("rev-parse", "--short", "HEAD")
        if head.returncode:
            return os.environ.get("ATTNKIT_COMMIT")
        dirty = run("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("ATTNKIT_COMMIT")


def environment(device: str) -> dict:
    """Device name, torch / CUDA / cuDNN / NCCL versions, the attnkit commit, the host."""
    info = machine_info(device)
    info.update(device=device, torch=torch.__version__, cuda=torch.version.cuda, attnkit_commit=git_commit())
    if device == "cuda":
        info.update(
            gpu=torch.cuda.get_device_name(),
            gpus=torch.cuda.device_count(),
            cudnn=torch.backends.cudnn.version(),
        )
        try:
            info["nccl"] = str(torch.cuda.nccl.version())
        except Exception as e:  # a build without NCCL: the suite still runs
            info["nccl"] = f"unknown ({type(e).__name__})"
    return info


def one_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# -- one part, in its own process ---------------------------------------------------------------
def run_part(args) -> int:
    """Run one part; its record (status, result so far) is rewritten in ``--work`` at every emit."""
    path = Path(args.work) / f"{args.part}.json"
    record: dict = {"status": "running", "result": {}}

    def save() -> None:
        with atomic_write(path) as f:
            json.dump(record, f, indent=1)

    def emit(**fields) -> None:
        record["result"].update(fields)
        save()

    ctx = Context(args.device, SMOKE if args.smoke else GPU, args.data_dir, args.checkpoint, Path(args.work))
    if args.smoke:
        torch.set_num_threads(1)  # toy sizes on a shared CPU: more threads only contend
    save()
    try:
        if args.stall == args.part:
            time.sleep(3600)  # the time-box test: sleep far past any box
        PARTS[args.part].run(ctx, emit)
        record["status"] = "ok"
    except Exception as e:  # the suite records the error line and goes on
        traceback.print_exc()
        record.update(status="failed", error=f"{type(e).__name__}: {one_line(str(e))}")
    save()
    return 0 if record["status"] == "ok" else 1


# -- the suite ---------------------------------------------------------------------------------
def run_child(cmd: list[str], box: float, log) -> tuple[int | None, str]:
    """Run ``cmd`` in a new process group, its output to stdout and ``log``; kill the group at ``box``
    seconds. (exit code or None when killed, the last line it printed)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    tail: collections.deque[str] = collections.deque(maxlen=20)

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
            tail.append(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        code: int | None = proc.wait(timeout=box)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the part and whatever it started (compile workers)
        proc.wait()
        code = None
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # anything the part left behind in its group
    except ProcessLookupError:
        pass
    reader.join(timeout=5)
    log.flush()
    return code, one_line("".join(tail))


def skip_reason(name: str, args) -> str | None:
    if name not in args.parts:
        return "not selected (--parts)"
    if name == "nccl" and args.device != "cuda":
        return "CPU run: NCCL needs two CUDA GPUs"
    if name == "nccl" and torch.cuda.device_count() < 2:
        return "one GPU"
    return None


def run_suite(args, argv: list[str]) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    boxes = {name: float(SMOKE_BOX if args.smoke else part.box_s) for name, part in PARTS.items()} | args.box
    results: dict = {
        "suite": "bench.gpu_suite",
        "mode": "smoke" if args.smoke else "full",
        "command": "python -m bench.gpu_suite " + " ".join(argv),
        "environment": environment(args.device),
        "boxes_s": boxes,
        "elapsed_s": 0.0,
        "parts": {name: {"status": "not run", "result": {}} for name in PARTS},
    }
    write(out, results)
    t_suite = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu_suite_") as work, open(out / "gpu_suite.log", "w") as log:
        for name in PARTS:
            t0 = time.monotonic()
            part: dict = {"status": "skipped", "box_s": boxes[name], "result": {}}
            if (reason := skip_reason(name, args)) is not None:
                part["reason"] = reason
            else:
                print(f"== {name} (box {boxes[name]:.0f} s)", flush=True)
                log.write(f"== {name}\n")
                code, last = run_child(child_command(args, name, work), boxes[name], log)
                path = Path(work) / f"{name}.json"
                record = json.loads(path.read_text()) if path.is_file() else {}
                part["result"] = record.get("result", {})
                if code is None:
                    part.update(status="timed_out", error=f"killed at its {boxes[name]:.0f} s box")
                elif code == 0 and record.get("status") == "ok":
                    part["status"] = "ok"
                else:
                    part.update(status="failed", error=record.get("error") or last or f"exit code {code}")
            part["seconds"] = round(time.monotonic() - t0, 1)
            results["parts"][name] = part
            results["elapsed_s"] = round(time.monotonic() - t_suite, 1)
            write(out, results)
            print(f"== {name}: {part['status']} in {part['seconds']} s", flush=True)
    return results


def child_command(args, name: str, work: str) -> list[str]:
    """``python -m bench.gpu_suite --part NAME`` with the suite's own options."""
    flags = [sys.executable, "-m", "bench.gpu_suite", "--part", name, "--work", work]
    flags += ["--device", args.device, "--data-dir", args.data_dir]
    flags += ["--smoke"] if args.smoke else []
    flags += ["--checkpoint", args.checkpoint] if args.checkpoint else []
    return flags + (["--stall", args.stall] if args.stall else [])


def write(out: Path, results: dict) -> None:
    with atomic_write(out / "gpu_suite.json") as f:
        json.dump(results, f, indent=1)
    with atomic_write(out / "gpu_suite.md") as f:
        f.write(markdown(results))


# -- the Markdown ------------------------------------------------------------------------------


def num(x, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def dims(m: dict) -> str:
    layers = f"{m['n_encoder_layers']}+{m['n_decoder_layers']} layers"
    return (
        f"d_model {m['d_model']}, {m['n_heads']} heads, d_ff {m['d_ff']}, {layers}, vocabulary {m['vocab']:,}"
    )


def caption(name: str, r: dict) -> str:
    """What the part's table measured: its settings, from the result."""
    if name in ("train_base", "train_big") and "batch" in r:
        b, peak = r["batch"], r["peak"]
        return (
            f"{dims(r['model'])} (shared), dropout {r['model']['dropout']}; {r['precision']}; "
            f"batch {b['B']} x {b['L']} = {b['target_tokens']:,} target tokens. Peak "
            f"{num(peak['tflops'], '.1f')} TFLOP/s ({peak['source']}); "
            f"measured bf16 matmul {r['measured_matmul_tflops']:.1f} TFLOP/s."
        )
    if name == "attention" and "tokens" in r:
        size = f"d_model {r['d_model']}, {r['n_heads']} heads, B x T = {r['tokens']:,}"
        return f"attnkit MultiHeadAttention, {size}, {r['precision']}, {r['mask']}."
    if name == "decode" and "batch" in r:
        models = "; ".join(f"{k}: {dims(m)}, {m['weights']}" for k, m in r["models"].items())
        return (
            f"{r['batch']} sentences of {r['source_length']} source tokens, {r['n_tokens']} output tokens "
            f"each (EOS masked), {r['precision']}. {models}. {r.get('graphs', '')}"
        )
    if name == "train_multi30k" and "config" in r:
        return f"`{r['config']}` with `{' '.join(r['overrides'])}`; corpus: {r['corpus']}."
    if name == "train_fp16" and "config" in r:
        runs = f"`{r['config']}` with `{' '.join(r['overrides'])}`, {r['steps']} steps"
        return f"{runs}; corpus: {r['corpus']}."
    return ""


def summary(name: str, rows: list[dict]) -> str:
    """The part's headline in one cell."""
    if name in ("train_base", "train_big"):
        return "; ".join(
            f"{x['engine']} {num(x['tokens_per_s'])} tok/s, MFU {num(x['mfu'], '.1%')}" for x in rows
        )
    if name == "attention":
        longest = [x for x in rows if x["T"] == rows[-1]["T"]]
        return f"T {rows[-1]['T']}, fwd+bwd: " + ", ".join(
            f"{x['path']} {num(x.get('fwd_bwd_ms'), '.2f')} ms"
            if x["status"] == "ok"
            else f"{x['path']} {x['status']}"
            for x in longest
        )
    if name == "decode":
        return "greedy / beam 4 sent/s: " + "; ".join(
            f"{x['model']} {x['engine']} {num(x.get('greedy'), ',.1f')} / {num(x.get('beam 4'), ',.1f')}"
            for x in rows
            if x["status"] == "ok"
        )
    if name == "train_multi30k":
        x = rows[0]
        bleu = num(x.get("bleu"), ".2f")
        return f"{x['steps']:,} steps in {x['train_minutes']:.1f} min, test BLEU {bleu} (beam 4)"
    if name == "train_fp16":
        return "; ".join(
            f"{x['run']} loss {num(x.get('train_loss'), '.3f')}"
            + (f", resume diff {x['resume_max_abs_diff']:.1e}" if "resume_max_abs_diff" in x else "")
            for x in rows
        )
    return f"bus {rows[0]['busbw_gbps']:.1f} GB/s, sums correct: {rows[0]['correct']}"  # nccl


def markdown(results: dict) -> str:
    """The summary table (one row a part), then each part's own table."""
    env = results["environment"]
    lines = [
        f"# attnkit GPU suite ({results['mode']})",
        "",
        f"{env.get('gpu', env['cpu'])}; torch {env['torch']}, CUDA {env['cuda']}; attnkit "
        f"{env['attnkit_commit'] or 'commit unknown'}; {env['date']}; {results['elapsed_s']:.0f} s in all.",
        f"Command: `{results['command']}`",
        "",
    ]
    rows = []
    for name, p in results["parts"].items():
        part_rows = p["result"].get("rows")
        note = "; ".join(
            x for x in (p.get("error") or p.get("reason"), part_rows and summary(name, part_rows)) if x
        )
        rows.append([name, p["status"], f"{num(p.get('seconds'), '.1f')} / {num(p.get('box_s'))}", note])
    lines += md_table(["part", "status", "s / box", "result"], rows)
    for name, p in results["parts"].items():
        if part_rows := p["result"].get("rows"):
            cols = PARTS[name].columns
            table = [
                [num(x.get(key), fmt) if fmt else str(x.get(key, "-")) for _, key, fmt in cols]
                for x in part_rows
            ]
            lines += ["", f"## {name}", "", caption(name, p["result"]), ""]
            lines += md_table([head for head, _, _ in cols], table)
    return "\n".join(lines) + "\n"


def parse_box(text: str) -> tuple[str, float]:
    name, _, seconds = text.partition("=")
    if name not in PARTS or not seconds:
        raise argparse.ArgumentTypeError(f"{text!r}: give PART=SECONDS, PART one of {', '.join(PARTS)}")
    return name, float(seconds)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", help="folder for gpu_suite.json, gpu_suite.md and gpu_suite.log")
    ap.add_argument("--device", choices=["cuda", "cpu"], help="default: cpu with --smoke, else cuda")
    ap.add_argument(
        "--smoke", action="store_true", help="toy sizes, a few steps: the CPU check (under a minute)"
    )
    ap.add_argument(
        "--data-dir", default="../shared/data", help="folder holding multi30k/ (default ../shared/data)"
    )
    ap.add_argument(
        "--checkpoint", help="the main job's checkpoint for the decode part (default: random init)"
    )
    ap.add_argument("--parts", default=",".join(PARTS), help="comma list of parts to run (the rest: skipped)")
    ap.add_argument(
        "--box", type=parse_box, action="append", default=[], help="PART=SECONDS: another time box"
    )
    ap.add_argument("--stall", choices=list(PARTS), help="test of the time box: PART sleeps past its box")
    ap.add_argument("--part", choices=list(PARTS), help=argparse.SUPPRESS)  # internal: run one part
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.device = args.device or ("cpu" if args.smoke else "cuda")
    if args.part:
        return run_part(args)
    if not args.out:
        ap.error("--out is required")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device here (use --smoke for the CPU check)")
    if args.device == "cpu" and not args.smoke:
        ap.error("the full sizes need a GPU: use --device cuda, or --smoke on a CPU")
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if unknown := sorted(set(args.parts) - set(PARTS)):
        ap.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    args.box = dict(args.box)
    results = run_suite(args, argv)
    print("\n" + markdown(results) + f"\nwrote {args.out}/gpu_suite.json and gpu_suite.md", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
