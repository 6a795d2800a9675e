"""What the serve tests share: one tiny trained checkpoint per test session, and a live server."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import torch

SRC = Path(__file__).resolve().parents[1] / "src"

# As tests/test_cli.py: trains in seconds; lr 0.01 so that 20 steps already produce words.
TINY_CONFIG = """\
data: {max_train_pairs: 300, max_valid_pairs: 10}
tokenizer: {vocab_size: 300}
model: {preset: tiny}
train: {max_steps: 20, max_tokens: 1000, schedule: inverse_sqrt, lr: 0.01, warmup_steps: 10, progress: false}
valid: {every: 20, keep_last: 1}
"""
_trained: dict[str, Path] = {}


def tiny_checkpoint(tmp_path_factory) -> Path:
    """A tiny Transformer trained once per session on 300 Multi30k pairs (several modules share it)."""
    if "ckpt" in _trained:
        return _trained["ckpt"]
    from attnkit.cli import main
    from conftest import find_data_dir, require_multi30k  # the one place that finds the data

    shared_data = require_multi30k(find_data_dir(), ci=os.environ.get("CI") == "true")

    root = tmp_path_factory.mktemp("serve_model")
    (root / "tiny.yaml").write_text(TINY_CONFIG)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(
                [
                    "train",
                    "--config",
                    str(root / "tiny.yaml"),
                    "--data-dir",
                    str(shared_data),
                    "--output-dir",
                    str(root / "run"),
                    "model.share_vocab=true",
                ]
            )
        assert code == 0, err.getvalue()
    finally:
        torch.set_num_threads(threads)
    _trained["ckpt"] = root / "run" / "checkpoint_best.pt"
    return _trained["ckpt"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 60) -> tuple[int, dict]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post_bytes(url: str, body: bytes, timeout: float = 60) -> tuple[int, dict]:
    """POST a file's bytes as they are (``/v1/caption``); (status, JSON answer)."""
    req = urllib.request.Request(url, body, {"Content-Type": "application/octet-stream"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@contextlib.contextmanager
def live_server(*checkpoints: Path, extra: tuple[str, ...] = ()):
    """``attnkit serve`` in a real process on a free loopback port; yields (base url, process)."""
    port = free_port()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    cmd = [sys.executable, "-m", "attnkit.cli", "serve", "--port", str(port), "--device", "cpu", *extra]
    for c in checkpoints:
        cmd += ["--checkpoint", str(c)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited with {proc.returncode}: {proc.stderr.read().decode()}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("server did not answer /health within 60 s") from None
                time.sleep(0.2)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@contextlib.contextmanager
def app_server(app):
    """``app`` served by uvicorn on a thread of this process, on a free port: its URL."""
    import threading

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True  # the app's lifespan closes its decoder
        thread.join(30)
