"""Fault suite, round three: each case one line and exit 2 (or a 422), never a traceback or an
output that silently lost something."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import assert_user_error, cli, cli_stdin

FIXTURE = Path(__file__).parent / "fixtures" / "c46ef86"
CKPT, CONFIG = FIXTURE / "translation_step3.pt", FIXTURE / "config.yaml"


@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999999"])
def test_a_seed_outside_32_bits_is_one_line(capsys, tmp_path, seed):
    code, _, err = cli(
        capsys,
        "train",
        "--config",
        Path(__file__).parent / "fixtures" / "c46ef86" / "config.yaml",
        "--output-dir",
        tmp_path / "run",
        f"train.seed={seed}",
    )
    assert_user_error(code, err, "seed", "0 to 4,294,967,295")


def test_an_unknown_key_suggests_the_close_one(capsys, tmp_path):
    config = Path(__file__).parent / "fixtures" / "c46ef86" / "config.yaml"
    code, _, err = cli(
        capsys, "train", "--config", config, "--output-dir", tmp_path / "run", "train.max_stepz=3"
    )
    assert_user_error(code, err, "max_stepz", "did you mean max_steps?")


@pytest.mark.parametrize("closed", ["0<&-", "1>&-"])
@pytest.mark.slow
def test_a_closed_standard_input_or_output_is_one_line(closed):
    cmd = f"{sys.executable} -m attnkit.cli translate --checkpoint {CKPT} {closed}"
    done = subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "standard " + ("input" if closed.startswith("0") else "output") + " is closed" in done.stderr


def test_workers_past_the_machine_s_cores_are_refused(capsys, tmp_path):
    too_many = str((os.cpu_count() or 1) + 1)
    code, _, err = cli(
        capsys, "prepare", "--config", tmp_path / "x.yaml", "--output", tmp_path / "p", "--workers", too_many
    )
    assert_user_error(code, err, "--workers", "cores")
    code, _, err = cli(capsys, "serve", "--checkpoint", CKPT, "--workers", too_many)
    assert code == 2 and "--workers" in err and "cores" in err


def test_a_prefix_the_vocabulary_cannot_spell_is_refused_not_printed_as_unknown(
    capsys, monkeypatch, tmp_path
):
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("A 狗 dog\n", encoding="utf-8")
    code, out, err = cli_stdin(
        capsys, monkeypatch, b"Ein Hund.\n", "translate", "--checkpoint", CKPT, "--prefix-file", prefix
    )
    assert_user_error(code, err, "prefix of sentence 1", "'狗'")
    assert out == ""


def test_ctranslate2_lets_the_length_limit_win_over_min_length_as_torch_does(capsys, monkeypatch, tmp_path):
    pytest.importorskip("ctranslate2")
    import shutil

    ckpt = tmp_path / "mt.pt"  # a copy: the export is cached beside the checkpoint
    shutil.copy(CKPT, ckpt)
    argv = ["translate", "--checkpoint", ckpt, "--beam", "1", "--min-length", "500", "--max-len-b", "6"]
    for engine in ("torch", "ctranslate2"):
        code, out, err = cli_stdin(capsys, monkeypatch, b"Ein Hund.\n", *argv, "--engine", engine)
        assert code == 0 and "Traceback" not in err, err
        assert len(out.split()) <= 1.5 * 4 + 6  # within the length limit, eos included


def test_a_hugging_face_export_is_readable_by_all_and_quiet(capsys, tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "hf"
    code, _, err = cli(capsys, "export", "--checkpoint", CKPT, "--format", "huggingface", "--out", out)
    assert code == 0 and "sacremoses" not in err, err
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, modes  # model.safetensors was 0600


def test_training_says_its_first_step_at_once(capsys, tmp_path, shared_data):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.read_text().replace("DATA_DIR", str(shared_data)))
    argv = ["train", "--config", config, "--output-dir", tmp_path / "run", "train.progress=true"]
    code, _, err = cli(capsys, *argv, "train.max_steps=2", "valid.every=2")
    assert code == 0, err
    assert "step 1 done after" in err  # long before step log_every (50 here)


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "vocabulary", "config"])
def test_a_damaged_ctranslate2_cache_is_made_again_not_used(capsys, monkeypatch, tmp_path, damage):
    pytest.importorskip("ctranslate2")
    import shutil

    ckpt = tmp_path / "mt.pt"
    shutil.copy(CKPT, ckpt)
    argv = ["translate", "--checkpoint", ckpt, "--engine", "ctranslate2", "--beam", "1"]
    code, sound, err = cli_stdin(capsys, monkeypatch, b"Ein Hund.\nZwei Hunde.\n", *argv)
    assert code == 0, err
    (cache,) = (tmp_path / "mt.pt.ct2").iterdir()
    model = cache / "model.bin"
    data = model.read_bytes()
    if damage == "flip":
        model.write_bytes(data[:-64] + bytes(b ^ 0xFF for b in data[-64:]))
    elif damage == "truncate":
        model.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        model.write_bytes(b"")
    elif damage == "vocabulary":
        next(p for p in cache.iterdir() if "vocabulary" in p.name).unlink()
    else:
        (cache / "config.json").write_text("{ not json")
    code, again, err = cli_stdin(capsys, monkeypatch, b"Ein Hund.\nZwei Hunde.\n", *argv)
    assert code == 0 and "damaged" in err and "Traceback" not in err, err
    assert again == sound  # the export made again, never the damaged one


def test_unclear_errors_name_what_is_wrong(capsys, tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[1]
    code, _, err = cli(
        capsys,
        "prepare",
        "--config",
        root / "configs" / "captions_shapes_tiny.yaml",
        "--output",
        tmp_path / "p",
    )
    assert_user_error(code, err, "a captioner", "does not train from them")
    code, _, err = cli(
        capsys,
        "train",
        "--config",
        CONFIG,
        "--output-dir",
        tmp_path / "r",
        "data.mix=[{files: [a.de, a.en], tag: '</s>'}]",
    )
    assert_user_error(code, err, "tag '</s>'", "special pieces")


def test_ctranslate2_refuses_a_language_model_before_exporting_it(capsys, monkeypatch, tmp_path):
    pytest.importorskip("ctranslate2")
    import torch

    from attnkit.checkpoint import save_checkpoint
    from attnkit.model import TransformerLM
    from attnkit.model.config import LMConfig
    from decoding_helpers import tiny_tokenizer

    tok = tiny_tokenizer()
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size)
    state = {"arch": "lm", "model_config": cfg.to_dict(), "model": TransformerLM(cfg).state_dict()}
    ckpt = save_checkpoint({**state, "tokenizer": tok.state_dict(), "experiment": {}}, tmp_path / "lm.pt")
    torch.manual_seed(0)
    argv = ["translate", "--checkpoint", ckpt, "--engine", "ctranslate2"]
    code, _, err = cli_stdin(capsys, monkeypatch, b"A dog\n", *argv)
    assert_user_error(code, err, "holds a language model")
    assert not (tmp_path / "lm.pt.ct2").exists()  # nothing exported for nothing


@pytest.mark.slow
def test_import_takes_a_hub_id_from_the_hub_s_cache_and_says_what_to_do_offline(capsys, tmp_path):
    pytest.importorskip("transformers")
    folder = tmp_path / "hf"
    assert cli(capsys, "export", "--checkpoint", CKPT, "--format", "huggingface", "--out", folder)[0] == 0
    cache = tmp_path / "hub"  # the layout huggingface_hub keeps: refs/main names the snapshot
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--someone--tiny-mt" / "snapshots" / revision
    snapshot.parent.mkdir(parents=True)
    (folder / ".attnkit-export.json").unlink()
    folder.rename(snapshot)
    (cache / "models--someone--tiny-mt" / "refs").mkdir()
    (cache / "models--someone--tiny-mt" / "refs" / "main").write_text(revision)
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    run = [sys.executable, "-m", "attnkit.cli", "import", "--format", "huggingface"]
    done = subprocess.run(
        [*run, "someone/tiny-mt", "--output", str(tmp_path / "x.pt")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0 and (tmp_path / "x.pt").is_file(), done.stderr
    done = subprocess.run(
        [*run, "someone/absent", "--output", str(tmp_path / "y.pt")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2 and "huggingface-cli download someone/absent" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_stopping_server_says_so(tmp_path):
    pytest.importorskip("fastapi")
    from serve_helpers import live_server

    with live_server(CKPT, extra=("--decoder", "thread")) as (_, proc):
        proc.terminate()
        proc.wait(timeout=30)
        err = proc.stderr.read().decode()
    assert "attnkit serve: stopping: finishing what is queued" in err and "attnkit serve: stopped" in err, err
