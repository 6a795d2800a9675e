"""The speed report: machine facts, ratios to attnkit, and the markdown tables."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform

import torch

from .peers.attnkit import version as attnkit_version
from .timing import OPTIMIZER


def machine_info(device: str) -> dict:
    """CPU (and GPU) model, cores, threads, date, Python and the toolkits' versions."""
    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    versions = {"attnkit": attnkit_version()}
    for dist in ("torch", "transformers", "joeynmt", "OpenNMT-py", "ctranslate2"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    info = dict(
        cpu=cpu,
        cores=os.cpu_count(),
        torch_threads=torch.get_num_threads(),
        date=date,
        python=platform.python_version(),
        versions=versions,
    )
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def progress(label: str, res: dict, unit: str) -> dict:
    """Print one setting's medians as soon as it is measured (a full run takes a while)."""
    print(f"{label}: " + ", ".join(f"{n} {r['median']:,.1f} {unit}" for n, r in res.items()), flush=True)
    return res


def add_ratios(section: dict) -> None:
    """Each peer's median and best-of-N as ratios to attnkit's in the same setting."""
    for res in section.values():
        base = res["attnkit"]
        for r in res.values():
            r["ratio_median"], r["ratio_best"] = r["median"] / base["median"], r["best"] / base["best"]


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def markdown(results: dict) -> str:
    """The report: training and decoding tables (value, ratio of medians, ratio of bests), notes."""
    m, s, peer_info = results["machine"], results["settings"], results["peers"]
    train, decode = results["train"], results["decode"]

    def cell(res, name, fmt):
        if (r := res.get(name)) is None:
            return "n/a"
        return f"{r['median']:{fmt}} ({r['ratio_median']:.2f}x, best {r['ratio_best']:.2f}x)"

    lines = [
        f"# attnkit speed benchmark ({s['mode']})",
        "",
        f"{m.get('gpu', m['cpu'])}, {m['cores']} CPU cores, torch threads {m['torch_threads']}, "
        f"{m['date']}; {s['peak_dtype']} matmul peak (best of 10, before and after training) "
        f"{results['peak_gflops']:,.1f} GFLOP/s.",
        "",
        "Cells: median (median ratio peer/attnkit, best-of-N ratio); > 1x = faster than attnkit. "
        f"Every trainable peer: {OPTIMIZER}; the same label-smoothed loss (peers: F.cross_entropy with "
        "label_smoothing=0.1; attnkit: its own, same value).",
        "",
        "## Training, target tokens/s (forward + backward + optimizer step)",
        "",
    ]
    header = ["peer", "params", *train, *(f"MFU {label}" for label in train)]
    rows = [
        [
            n,
            f"{peer_info[n]['n_params']:,}",
            *(cell(r, n, ",.0f") for r in train.values()),
            *(f"{r[n]['mfu_median']:.1%}" if n in r else "n/a" for r in train.values()),
        ]
        for n in peer_info
        if any(n in r for r in train.values())
    ]
    lines += md_table(header, rows)
    lines += ["", f"## Decoding, sentences/s ({s['sizes']['n_tokens']} tokens each, EOS disabled)", ""]
    rows = [[n, *(cell(r, n, ",.1f") for r in decode.values())] for n in peer_info]
    lines += md_table(["peer", *decode], rows)
    if results["attention_memory"]:
        lines += ["", "## Peak self-attention memory, MiB (forward + backward, bf16, batch 1, d 512)", ""]
        rows, prev = [], None
        for row in results["attention_memory"]:
            f, r = row["fused_mib"], row["reference_mib"]
            growth = f"{f / prev:.2f}x" if f and prev else "-"
            rows.append(
                [
                    str(row["seq_len"]),
                    "OOM" if f is None else f"{f:,.1f}",
                    growth,
                    "OOM" if r is None else f"{r:,.1f}",
                ]
            )
            prev = f
        lines += md_table(["T", "fused", "fused vs T/2", "reference (weights stored)"], rows)
    lines += ["", "## Notes", "", *(f"- **{n}** {p['version']}: {p['notes']}" for n, p in peer_info.items())]
    return "\n".join(lines + [f"- {note}" for note in s["notes"]]) + "\n"
