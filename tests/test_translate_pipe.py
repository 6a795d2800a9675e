"""``attnkit translate`` on a pipe prints each translation as soon as its line arrives."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading

import pytest
import torch

from attnkit.errors import DataError
from attnkit.tasks.translation import Translator
from attnkit.tasks.translation.translate_command import arriving_lines
from serve_helpers import SRC, tiny_checkpoint

LINES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau lacht."]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.set_num_threads(1)
    return tiny_checkpoint(tmp_path_factory)


def _readline(stream, timeout: float) -> str:
    """One line from a process's stdout, or fail after ``timeout`` seconds (never hang)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no output line within {timeout} s"
    return stream.readline().decode("utf-8").rstrip("\n")


@pytest.mark.slow
def test_each_line_is_translated_before_the_next_arrives(ckpt):
    expected = [t.text for t in Translator.from_checkpoint(ckpt, device="cpu").translate(LINES, beam=2)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    cmd = [
        sys.executable,
        "-m",
        "attnkit.cli",
        "translate",
        "--checkpoint",
        str(ckpt),
        "--beam",
        "2",
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        for line, want in zip(LINES, expected):
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()  # the pipe stays open: only a streaming reader answers now
            assert _readline(proc.stdout, 60) == want
        proc.stdin.close()
        assert proc.wait(30) == 0, proc.stderr.read().decode()
        assert proc.stdout.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.slow
def test_a_file_gives_the_same_lines_as_the_stream(ckpt, tmp_path):
    src = tmp_path / "in.de"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    base = [sys.executable, "-m", "attnkit.cli", "translate", "--checkpoint", str(ckpt), "--beam", "2"]
    from_file = subprocess.run([*base, "--input", str(src)], capture_output=True, env=env, timeout=120)
    from_pipe = subprocess.run(base, input=src.read_bytes(), capture_output=True, env=env, timeout=120)
    assert from_file.returncode == from_pipe.returncode == 0, from_file.stderr + from_pipe.stderr
    assert from_file.stdout == from_pipe.stdout and len(from_file.stdout.splitlines()) == len(LINES)


def _feed(chunks: list[bytes]) -> list[list[str]]:
    """Write ``chunks`` to a pipe one by one, each after the reader has yielded all whole lines so far."""
    r, w = os.pipe()
    got: list[list[str]] = []
    reader = threading.Thread(target=lambda: got.extend(arriving_lines(r)))
    reader.start()
    try:
        written = 0
        for chunk in chunks:
            os.write(w, chunk)
            written += chunk.count(b"\n")
            for _ in range(500):
                if sum(map(len, got)) >= written:
                    break
                threading.Event().wait(0.01)
    finally:
        os.close(w)
        reader.join(10)
        os.close(r)
    return got


def test_arriving_lines_waits_for_whole_lines_and_keeps_a_last_unterminated_one():
    got = _feed([b"a\nb", b"b\r\n", b"c"])
    assert [line for group in got for line in group] == ["a", "bb", "c"]
    assert got[0] == ["a"]  # "b" was incomplete: not yielded with "a"


def test_arriving_lines_names_a_bad_line():
    r, w = os.pipe()
    os.write(w, b"ok\n\xff\n")
    os.close(w)
    try:
        with pytest.raises(DataError, match="stdin line 2: not valid UTF-8"):
            list(arriving_lines(r))
    finally:
        os.close(r)
