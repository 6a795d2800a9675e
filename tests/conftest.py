"""Fixtures shared by the test files: the data folder, every seq2seq model kind, tiny trained runs.

The corpus lives beside the repository, never inside it: ``$ATTNKIT_DATA``, else ``../shared/data``
next to the repository root. Without it, tests that need it skip with the reason; in CI
(``CI=true``) they fail instead, so a missing data folder cannot pass silently.
"""

from __future__ import annotations

import gzip
import io
import os
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from cli_helpers import N_EVAL, TINY_CONFIG
from fault_helpers import files  # noqa: F401 (the fault suite's input files, a fixture)
from helpers import make_model

FALLBACK_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (pyproject's addopts): a worker per core, at most 4, since many tests start
    processes or threads of their own (servers, two-process training, the GPU suite's smoke run).
    ``$PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides it, as it does xdist's own count."""
    if given := os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(given)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def find_data_dir() -> Path:
    """``$ATTNKIT_DATA`` if set, else ``shared/data`` beside the repository."""
    env = os.environ.get("ATTNKIT_DATA")
    return Path(env).expanduser() if env else FALLBACK_DATA


def require_multi30k(path: Path, ci: bool) -> Path:
    """``path`` if it holds Multi30k; else skip (fail in CI) naming the path."""
    if (path / "multi30k" / "train.de.gz").is_file():
        return path
    reason = f"Multi30k not found under {path}/multi30k (set ATTNKIT_DATA to the folder holding multi30k/)"
    if ci:
        pytest.fail(f"{reason}; CI=true, so this is a failure, not a skip", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def one_thread():
    """Tiny models on a shared CPU: one torch thread is faster (more only contend), and results do not
    depend on how many threads the host gives (another summation order can change a training path).
    A module opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The data folder holding ``multi30k/``."""
    return require_multi30k(find_data_dir(), ci=os.environ.get("CI") == "true")


@pytest.fixture(params=["transformer", "transformer-pre", "rnn"])
def seq2seq(request):
    return make_model(request.param)


@dataclass
class Runs:
    """What the session fixture trained, and the small data it wrote."""

    transformer_dir: Path
    rnn_dir: Path
    train_stdout: str  # what `attnkit train` printed for the Transformer
    eval_data: Path  # a data dir whose multi30k/test_2016_flickr.{de,en}.gz hold N_EVAL pairs
    eval_src: Path  # the same pairs as plain files
    eval_ref: Path

    @property
    def ckpt(self) -> Path:
        return self.transformer_dir / "checkpoint_best.pt"

    @property
    def rnn_ckpt(self) -> Path:
        return self.rnn_dir / "checkpoint_best.pt"

    @property
    def step_ckpts(self) -> list[Path]:
        return [self.transformer_dir / "checkpoint_step10.pt", self.transformer_dir / "checkpoint_step20.pt"]


@pytest.fixture(scope="session")
def runs(tmp_path_factory, shared_data) -> Runs:
    """A tiny Transformer (through ``attnkit train``) and a tiny RNN (through the API), trained once
    on 300 Multi30k pairs for 20 steps: enough to exercise every command, not to translate well.
    Tests must not write into their folders."""
    from attnkit.cli import main
    from attnkit.train import load_config, train

    root = tmp_path_factory.mktemp("runs")
    config = root / "tiny.yaml"
    config.write_text(TINY_CONFIG)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared CPU: more threads only contend (~5x slower)
    try:
        stdout, stderr = io.StringIO(), io.StringIO()
        with redirect_stdout(stdout), redirect_stderr(stderr):
            code = main(
                [
                    "train",
                    "--config",
                    str(config),
                    "--data-dir",
                    str(shared_data),
                    "--output-dir",
                    str(root / "transformer"),
                    "model.share_vocab=true",
                ]
            )
        assert code == 0, stderr.getvalue()
        rnn = load_config(
            config, ["model.arch=rnn", f"data.data_dir={shared_data}", f"output_dir={root / 'rnn'}"]
        )
        train(rnn, log=lambda message: None)
    finally:
        torch.set_num_threads(threads)

    eval_data = root / "eval_data"
    (eval_data / "multi30k").mkdir(parents=True)
    for lang in ("de", "en"):
        with gzip.open(shared_data / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
            text = "".join(f.readline() for _ in range(N_EVAL))
        with gzip.open(eval_data / "multi30k" / f"test_2016_flickr.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write(text)
        (root / f"eval.{lang}").write_text(text, encoding="utf-8")
    return Runs(
        root / "transformer", root / "rnn", stdout.getvalue(), eval_data, root / "eval.de", root / "eval.en"
    )
