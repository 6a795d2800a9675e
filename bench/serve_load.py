"""Load test of ``attnkit serve`` on loopback: throughput and latency at 1, 4, 16 and 64 clients.

Each client sends one test_2016_flickr sentence per request (beam 4) and waits for the answer
before sending the next (on a keep-alive connection of bench/http_client.py, the lean client, or
httpx with --client httpx); the server's dynamic batching groups concurrent requests. Beside it, the
offline throughput (best of 3) of ``Translator.translate`` (what ``attnkit translate`` runs; with ``--engine
ctranslate2`` the server and offline both decode with CTranslate2) on the same sentences in the same
process setup, measured before the load levels and again after them (on a
shared machine the two bound the drift; each level's ratio is given against both). Optionally a
soak: 16 clients for N minutes, the server's resident memory sampled, every error counted.
Bounded: at most --sentences requests and --max-seconds per level; the server binds 127.0.0.1 only
and is stopped at the end.

    python -m bench.serve_load --checkpoint runs/multi30k_de_en_tiny/checkpoint_best.pt \
        --data-dir ../shared/data --out bench/results/serve_load.json [--soak-minutes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gzip
import json
import os
import platform
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import httpx
import torch

from .http_client import Connection, HTTPError

ROOT = Path(__file__).resolve().parents[1]


def run_async(coro):
    """Run the load generator on uvloop where installed (the server's loop too): less CPU per request."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def sentences(data_dir: Path, n: int, lang: str = "de") -> list[str]:
    with gzip.open(data_dir / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:n]


def source_lang(checkpoint: str, given: str | None) -> str:
    """The language to send: ``given``, else the checkpoint's training source language (de if unknown)."""
    if given:
        return given
    from attnkit.checkpoint import load_checkpoint

    data = (load_checkpoint(checkpoint).get("experiment") or {}).get("data") or {}
    return data.get("src_lang") or "de"


def offline_throughput(
    checkpoint: str, texts: list[str], beam: int, threads: int, engine: str = "torch", repeats: int = 3
) -> dict:
    """``attnkit translate``'s throughput, best of ``repeats`` calls on all ``texts``:
    ``Translator.translate``, or with ``engine="ctranslate2"`` the same call on CTranslate2
    (``CT2Translator``, the checkpoint's cached export) in whichever of its thread layouts is faster
    here, one replica of ``threads`` threads or ``threads`` replicas of one (its users' fastest path).
    """
    from attnkit.tasks.translation import Translator
    from attnkit.tasks.translation.ct2_engine import CT2Translator

    torch.set_num_threads(threads)
    engines: dict[str, Translator | CT2Translator] = {}
    if engine == "ctranslate2":
        import ctranslate2

        one = CT2Translator.from_checkpoint(checkpoint, device="cpu", threads=threads)
        engines[f"1 replica x {threads} threads"] = one
        if threads > 1:
            many = copy.copy(one)  # the same torch side, another CTranslate2 translator
            many.ct2 = ctranslate2.Translator(
                str(one.folder), device="cpu", inter_threads=threads, intra_threads=1
            )
            engines[f"{threads} replicas x 1 thread"] = many
    else:
        engines[f"torch, {threads} threads"] = Translator.from_checkpoint(checkpoint, device="cpu")
    best: dict = {}
    fastest = float("inf")
    for layout, translator in engines.items():
        translator.translate(texts[:16], beam=beam)  # warm-up
        for _ in range(repeats):
            start, cpu = time.perf_counter(), time.process_time()
            translator.translate(texts, beam=beam)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            if seconds < fastest:
                fastest = seconds
                best = {
                    "layout": layout,
                    "sentences": len(texts),
                    "seconds": round(seconds, 3),
                    "sentences_per_s": round(len(texts) / seconds, 2),
                    "cpu_seconds": round(cpu, 3),
                    "cpu_ms_per_sentence": round(1000 * cpu / len(texts), 2),
                }
    return best


def family(pid: int) -> list[int]:
    """The process and its descendants (the server, its decoding process and multiprocessing's
    small resource tracker); one that exits during the walk is skipped."""
    pids, i = [pid], 0
    while i < len(pids):
        for task in Path(f"/proc/{pids[i]}/task").glob("*"):
            with contextlib.suppress(OSError):
                pids += [int(c) for c in (task / "children").read_text().split()]
        i += 1
    return pids


def _proc_file(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except OSError:  # exited meanwhile
        return ""


def rss_mb(pid: int) -> float:
    """Resident memory of the process and its descendants."""
    total = 0
    for p in family(pid):
        for line in _proc_file(p, "status").splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def cpu_seconds(pid: int, *, descendants: bool = True) -> float:
    """User + system CPU time of a process, all its threads (and its descendants')."""
    total = 0
    for p in family(pid) if descendants else [pid]:
        stat = _proc_file(p, "stat")
        if stat:
            fields = stat.rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def load(
    url: str,
    texts: list[str],
    clients: int,
    beam: int,
    *,
    count: int,
    seconds: float,
    client: str = "lean",
    key: str | None = None,
) -> dict:
    """``clients`` closed-loop clients until ``count`` requests are answered or ``seconds`` pass.

    ``client``: "lean" (bench.http_client: one keep-alive connection each, bytes written by hand) or
    "httpx" (its async client), to show what the load generator itself costs. ``key``: sent as
    ``Authorization: Bearer`` with every request.
    """
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    latencies: list[float] = []
    errors: list[str] = []
    next_index = 0
    deadline = time.perf_counter() + seconds
    bodies = [json.dumps({"text": t, "beam": beam}).encode() for t in texts]  # prepared outside the timing

    async def run(post):
        nonlocal next_index
        while next_index < count and time.perf_counter() < deadline:
            body = bodies[next_index % len(bodies)]
            next_index += 1
            t0 = time.perf_counter()
            try:
                status, answer = await post(body)
            except (HTTPError, httpx.HTTPError) as e:
                errors.append(f"{type(e).__name__}: {e}")
                continue
            if status != 200:
                errors.append(f"HTTP {status}: {answer[:200]!r}")
                continue
            latencies.append(time.perf_counter() - t0)

    start, cpu = time.perf_counter(), time.process_time()
    if client == "lean":
        host, port = url.removeprefix("http://").rsplit(":", 1)
        connections = [Connection(host, int(port), headers=auth) for _ in range(clients)]

        def lean_post(c: Connection):
            return lambda body: c.post("/v1/translate", body)

        try:
            await asyncio.gather(*(run(lean_post(c)) for c in connections))
        finally:
            await asyncio.gather(*(c.close() for c in connections))
    else:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(limits=limits, timeout=120) as c:

            async def httpx_post(body: bytes) -> tuple[int, bytes]:
                r = await c.post(
                    url + "/v1/translate", content=body, headers={"content-type": "application/json", **auth}
                )
                return r.status_code, r.content

            await asyncio.gather(*(run(httpx_post) for _ in range(clients)))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    ms = [1000 * x for x in latencies]
    return {
        "clients": clients,
        "client": client,
        "answered": len(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
        "seconds": round(wall, 3),
        "sentences_per_s": round(len(latencies) / wall, 2),
        # the load generator's own CPU (it shares the machine with the server)
        "client_cpu_ms_per_request": round(1000 * cpu / max(len(latencies) + len(errors), 1), 2),
        "p50_ms": round(percentile(ms, 50), 1) if ms else None,
        "p95_ms": round(percentile(ms, 95), 1) if ms else None,
        "p99_ms": round(percentile(ms, 99), 1) if ms else None,
    }


def start_server(args) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    if args.key:
        env["ATTNKIT_API_KEYS"] = args.key  # the server asks every request for it
    cmd = [
        sys.executable,
        "-m",
        "attnkit.cli",
        "serve",
        "--checkpoint",
        args.checkpoint,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--max-batch-tokens",
        str(args.max_batch_tokens),
        "--max-wait-ms",
        str(args.max_wait_ms),
        "--threads",
        str(args.threads),
        "--join-group",
        str(args.join_group),
        "--join-wait-steps",
        str(args.join_wait_steps),
        "--decoder",
        args.decoder,
        "--workers",
        str(args.workers),
        "--engine",
        args.engine,
        *(["--max-gap-ms", str(args.max_gap_ms)] if args.max_gap_ms is not None else []),
        *(["--compile"] if args.compile else []),
    ]
    proc = subprocess.Popen(cmd, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("server did not start")


def soak(
    url: str, pid: int, texts: list[str], beam: int, minutes: float, client: str, key: str | None
) -> dict:
    samples = [(0.0, round(rss_mb(pid), 1))]
    totals = {"answered": 0, "errors": 0}
    end = time.perf_counter() + 60 * minutes
    start = time.perf_counter()
    while time.perf_counter() < end:
        chunk = min(30.0, end - time.perf_counter())
        r = run_async(load(url, texts, 16, beam, count=10**9, seconds=chunk, client=client, key=key))
        totals["answered"] += r["answered"]
        totals["errors"] += r["errors"]
        samples.append((round(time.perf_counter() - start, 1), round(rss_mb(pid), 1)))
    return {
        "minutes": minutes,
        **totals,
        "rss_mb_start": samples[0][1],
        "rss_mb_end": samples[-1][1],
        "rss_mb_max": max(s[1] for s in samples),
        "rss_samples": samples,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-dir", default=os.environ.get("ATTNKIT_DATA", str(ROOT.parent / "shared" / "data")))
    p.add_argument("--sentences", type=int, default=400, help="requests per concurrency level")
    p.add_argument("--clients", default="1,4,16,64")
    p.add_argument(
        "--source-lang", help="send test_2016_flickr.LANG.gz (default: the checkpoint's source language)"
    )
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--max-batch-tokens", type=int, default=4000)
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--max-gap-ms", type=float, help="the server's --max-gap-ms (default: its default)")
    p.add_argument("--join-group", type=int, default=4, help="the server's --join-group")
    p.add_argument(
        "--join-wait-steps", type=int, default=4, help="the server's --join-wait-steps (0: join at once)"
    )
    p.add_argument("--max-seconds", type=float, default=180, help="time bound per level")
    p.add_argument("--threads", type=int, default=1, help="torch threads of each server worker (default 1)")
    p.add_argument("--workers", type=int, default=1, help="the server's --workers (decoding processes)")
    p.add_argument(
        "--offline-threads",
        type=int,
        help="torch threads offline (default: threads x workers, the cores the server decodes on)",
    )
    p.add_argument(
        "--decoder", choices=("process", "thread"), default="process", help="the server's --decoder"
    )
    p.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="the load generator's HTTP client (lean: bench.http_client)",
    )
    p.add_argument(
        "--engine",
        choices=("torch", "ctranslate2"),
        default="torch",
        help="the server's --engine; offline runs the same engine",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="the server's --compile; each level runs once untimed first (each new bucket compiles); "
        "offline stays eager, the fastest offline path",
    )
    p.add_argument(
        "--api-key",
        action="store_true",
        help="serve with an API key and send it with every request (what checking it costs)",
    )
    p.add_argument("--soak-minutes", type=float, default=0)
    p.add_argument("--out", help="write the results here as JSON")
    args = p.parse_args()
    args.key = secrets.token_urlsafe(24) if args.api_key else None
    offline_threads = args.offline_threads or args.threads * args.workers

    texts = sentences(Path(args.data_dir), args.sentences, source_lang(args.checkpoint, args.source_lang))
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible",
        "server": (
            f"{args.workers} decoding worker(s) x {args.threads} thread(s), --decoder {args.decoder}, "
            f"--engine {args.engine}{' --compile' if args.compile else ''}"
            f"{', an API key asked of every request' if args.key else ''}"
        ),
        "offline_threads": offline_threads,
        "offline": offline_throughput(args.checkpoint, texts, args.beam, offline_threads, args.engine),
        "levels": [],
    }
    print("offline Translator.translate:", result["offline"], flush=True)
    offline_rate = result["offline"]["sentences_per_s"]
    proc, url = start_server(args)
    try:
        run_async(
            load(url, texts, 4, args.beam, count=32, seconds=60, client=args.client, key=args.key)
        )  # warm-up

        def level_of(clients: int, seconds: float) -> dict:
            return run_async(
                load(
                    url,
                    texts,
                    clients,
                    args.beam,
                    count=len(texts),
                    seconds=seconds,
                    client=args.client,
                    key=args.key,
                )
            )

        for clients in (int(c) for c in args.clients.split(",")):
            if args.compile:  # untimed: this level's buckets compile
                level_of(clients, 600)
            cpu, http_cpu = cpu_seconds(proc.pid), cpu_seconds(proc.pid, descendants=False)
            level = level_of(clients, args.max_seconds)
            level["vs_offline"] = round(level["sentences_per_s"] / offline_rate, 3)
            # The server's CPU per answered sentence (all its threads) against offline's: what the
            # machine's other load cannot move much, unlike sentences per second.
            answered = max(level["answered"], 1)
            level["server_cpu_ms_per_sentence"] = round(1000 * (cpu_seconds(proc.pid) - cpu) / answered, 2)
            # of which the HTTP process's own (all of it with --decoder thread)
            level["http_process_cpu_ms_per_sentence"] = round(
                1000 * (cpu_seconds(proc.pid, descendants=False) - http_cpu) / answered, 2
            )
            level["cpu_efficiency_vs_offline"] = round(
                result["offline"]["cpu_ms_per_sentence"] / level["server_cpu_ms_per_sentence"], 3
            )
            level["load_average_1min"] = round(os.getloadavg()[0], 2)  # the host's load at the level's end
            result["levels"].append(level)
            print(level, flush=True)
        health = json.loads(urllib.request.urlopen(url + "/health").read())
        result["server_model_calls"], result["server_requests"] = (
            health["model_calls"],
            health["requests_batched"],
        )
        result["server_decode_steps"] = health.get("decode_steps")
        if args.soak_minutes > 0:
            result["soak"] = soak(url, proc.pid, texts, args.beam, args.soak_minutes, args.client, args.key)
            print({k: v for k, v in result["soak"].items() if k != "rss_samples"}, flush=True)
    finally:
        proc.terminate()
        proc.wait(60)
    if result["levels"]:  # again after the levels: the spread of the two shows the machine's drift
        result["offline_after"] = offline_throughput(
            args.checkpoint, texts, args.beam, offline_threads, args.engine
        )
        print("offline Translator.translate, after:", result["offline_after"], flush=True)
        after = result["offline_after"]["sentences_per_s"]
        for level in result["levels"]:
            level["vs_offline_after"] = round(level["sentences_per_s"] / after, 3)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
