"""A checkpoint written by the code before tasks became plugins (c46ef86, tests/fixtures/c46ef86) still
loads, translates, evaluates, serves, exports and trains on with --resume to the very weights the
uninterrupted run reached."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

from cli_helpers import cli, cli_stdin, run_process
from conftest import find_data_dir, require_multi30k

FIXTURE = Path(__file__).parent / "fixtures" / "c46ef86"
CKPT = FIXTURE / "translation_step3.pt"


def model_sha256(path: Path) -> str:
    state = torch.load(path, weights_only=True)["model"]
    h = hashlib.sha256()
    for name in sorted(state):
        h.update(name.encode())
        h.update(state[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def test_it_translates_evaluates_and_serves(capsys, tmp_path, monkeypatch):
    code, out, err = cli_stdin(capsys, monkeypatch, b"Ein Hund.\n", "translate", "--checkpoint", CKPT)
    assert code == 0 and len(out.splitlines()) == 1, err
    (tmp_path / "src.de").write_text("Ein Hund läuft.\nZwei Männer.\n")
    (tmp_path / "ref.en").write_text("A dog runs.\nTwo men.\n")
    code, out, err = cli(
        capsys, "evaluate", "--checkpoint", CKPT, "--src", tmp_path / "src.de", "--ref", tmp_path / "ref.en"
    )
    assert code == 0 and "BLEU" in out, err
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from attnkit.serve.app import create_app
    from attnkit.serve.tasks import load_models

    with TestClient(create_app(load_models([str(CKPT)], device="cpu"))) as client:
        r = client.post("/v1/translate", json={"text": "Ein Hund.", "beam": 2})
        assert r.status_code == 200 and r.json()["translations"][0]["nbest"], r.text
        assert client.get("/v1/models").json()["models"][0]["task"] == "translate"


def test_it_exports(capsys, tmp_path):
    pytest.importorskip("ctranslate2")
    code, _, err = cli(
        capsys, "export", "--checkpoint", CKPT, "--format", "ctranslate2", "--out", tmp_path / "ct2"
    )
    assert code == 0, err


@pytest.mark.slow
def test_it_resumes_to_the_uninterrupted_run_s_weights(tmp_path):
    data = require_multi30k(find_data_dir(), ci=os.environ.get("CI") == "true")
    config = tmp_path / "config.yaml"
    config.write_text((FIXTURE / "config.yaml").read_text().replace("DATA_DIR", str(data)))
    out_dir = tmp_path / "run"
    # one thread, as the fixture was made: the sums run in one order
    done = run_process("train", "--config", config, "--resume", CKPT, "--output-dir", out_dir)
    assert done.returncode == 0, done.stderr.decode()
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert model_sha256(out_dir / "checkpoint_last.pt") == expected["model_sha256"]
    last_valid = [
        line for line in (out_dir / "metrics.csv").read_text().splitlines() if line.startswith("6,")
    ][-1]
    assert last_valid.split(",")[-2] == expected["metrics_csv"].splitlines()[-1].split(",")[-2]  # val_loss
