"""Fault suite, export and import: what ``--force`` may replace, killed exports, damaged Marian
folders, a full disk while exporting.

Issue 37 items 1 (``export --force`` replaces an earlier export only, never a project or the
checkpoint's run folder; work folders of killed exports are removed), 2 (``import`` accounts for
every tensor and checks finiteness, types and the tokenizer) and 3 (a full disk during the Hugging
Face export is one line, exit 2, nothing half-written).
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from export_helpers import require
from fault_helpers import assert_user_error, cli, make_tokenizer, process_env, write_checkpoint

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer(seed=0)


@pytest.fixture
def ckpt(tmp_path, tokenizer) -> Path:
    return write_checkpoint(tmp_path / "model.pt", tokenizer)


def export(ckpt: Path, out: Path, *flags, fmt: str = "ctranslate2"):
    require("ctranslate2" if fmt == "ctranslate2" else "transformers", "safetensors")
    return cli("export", "--checkpoint", ckpt, "--format", fmt, "--output", out, *flags)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def hidden_leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- item 1: what --force may replace -----------------------------------------------------------


def test_force_refuses_a_folder_that_is_not_an_export(ckpt, tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "notes.txt").write_text("mine")
    (project / "src" / "main.py").write_text("print(1)")
    before = snapshot(project)
    code, _, err = export(ckpt, project, "--force")
    assert_user_error(code, err, str(project), "not an earlier attnkit export")
    assert snapshot(project) == before and hidden_leftovers(tmp_path) == []


def test_force_refuses_the_run_folder_of_the_checkpoint(tmp_path, tokenizer):
    run = tmp_path / "run"
    run.mkdir()
    best = write_checkpoint(run / "checkpoint_best.pt", tokenizer)
    (run / "metrics.csv").write_text("step,val_bleu\n10,1.0\n")
    before = snapshot(run)
    for out in (run, tmp_path):  # the run folder, and a folder above it
        code, _, err = export(best, out, "--force")
        assert_user_error(code, err, "holds --checkpoint")
    assert snapshot(run) == before


def test_force_refuses_an_export_holding_the_checkpoint(tmp_path, tokenizer):
    """Even an earlier export is kept when the checkpoint was put inside it."""
    out = tmp_path / "ct2"
    code, _, err = export(write_checkpoint(tmp_path / "a.pt", tokenizer), out)
    assert code == 0, err
    inside = write_checkpoint(out / "model.pt", tokenizer)
    code, _, err = export(inside, out, "--force")
    assert_user_error(code, err, "holds --checkpoint")
    assert inside.is_file()


@pytest.mark.parametrize("fmt", ["ctranslate2", "huggingface"])
def test_force_replaces_an_earlier_export_but_not_files_added_to_it(ckpt, tmp_path, fmt):
    out = tmp_path / "exported"
    code, _, err = export(ckpt, out, fmt=fmt)
    assert code == 0, err
    marker = json.loads((out / ".attnkit-export.json").read_text())
    assert marker["format"] == fmt and sorted(marker["files"]) == sorted(
        n for n in snapshot(out) if n != ".attnkit-export.json"
    )
    code, _, err = export(ckpt, out, "--force", fmt=fmt)
    assert code == 0, err
    (out / "my_notes.txt").write_text("keep me")
    code, _, err = export(ckpt, out, "--force", fmt=fmt)
    assert_user_error(code, err, "my_notes.txt", "did not write")
    assert (out / "my_notes.txt").read_text() == "keep me"
    assert hidden_leftovers(tmp_path) == []


def test_force_replaces_an_empty_folder(ckpt, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    code, _, err = export(ckpt, out, "--force")
    assert code == 0 and (out / "model.bin").is_file(), err


KILLED_EXPORT = """
import sys, time
from pathlib import Path
from attnkit.export.output import write_then_swap
def write(folder):
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"half")
    print("writing", flush=True)
    time.sleep(600)
write_then_swap(Path(sys.argv[1]), write, "ctranslate2")
"""


def start_export_that_hangs(out: Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_EXPORT, str(out)], stdout=subprocess.PIPE, env=process_env()
    )
    assert child.stdout is not None and child.stdout.readline() == b"writing\n"
    return child


@pytest.mark.slow
def test_work_folders_of_killed_exports_are_removed_by_the_next_one(ckpt, tmp_path):
    out = tmp_path / "ct2"
    killed = start_export_that_hangs(out)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    (dead,) = hidden_leftovers(tmp_path)
    assert dead.startswith(".ct2.attnkit-work.")
    unrelated = tmp_path / ".ct2.attnkit-work.mine"  # no lock file: not provably ours
    unrelated.mkdir()
    running = start_export_that_hangs(out)  # an export of the same name removes the killed one's folder
    try:
        (writing,) = set(hidden_leftovers(tmp_path)) - {unrelated.name}
        assert writing != dead
        code, _, err = export(ckpt, out)
        assert code == 0 and (out / "model.bin").stat().st_size > 100, err
        assert hidden_leftovers(tmp_path) == sorted([unrelated.name, writing])  # in use, or not ours
        assert (tmp_path / writing / "new" / "model.bin").read_bytes() == b"half"
    finally:
        running.kill()
        running.wait()


# -- item 2: import checks every tensor, the config's types and the tokenizer -------------------


@pytest.fixture(scope="module")
def marian(tmp_path_factory, tokenizer) -> Path:
    """A MarianMTModel folder: a tiny random attnkit model exported to Hugging Face."""
    require("transformers", "safetensors", "google.protobuf")
    from attnkit.export import export_checkpoint

    root = tmp_path_factory.mktemp("marian")
    return export_checkpoint(write_checkpoint(root / "model.pt", tokenizer), "huggingface", root / "hf")


def damaged(marian: Path, tmp_path: Path, *, tensors=None, config=None, vocab=None) -> Path:
    """A copy of the Marian folder with its weights, config.json or vocab.json changed by a function."""
    from safetensors.torch import load_file, save_file

    folder = Path(shutil.copytree(marian, tmp_path / "marian"))
    if tensors is not None:
        state = {k: v.clone() for k, v in load_file(str(folder / "model.safetensors")).items()}
        tensors(state)
        save_file(state, str(folder / "model.safetensors"))
    for name, change in (("config.json", config), ("vocab.json", vocab)):
        if change is not None:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
            (folder / name).write_text(json.dumps(change(data)), encoding="utf-8")
    return folder


def import_fails(folder: Path, tmp_path: Path, *fragments: str) -> None:
    out = tmp_path / "imported.pt"
    code, _, err = cli("import", "--format", "huggingface", folder, "--output", out)
    assert_user_error(code, err, *fragments)
    assert not out.exists()


def test_import_of_an_intact_folder_works(marian, tmp_path):
    out = tmp_path / "imported.pt"
    code, _, err = cli("import", "--format", "huggingface", marian, "--output", out)
    assert code == 0 and out.is_file(), err


LAYER_WEIGHT = "model.encoder.layers.0.fc1.weight"


def drop(name):
    return lambda state: state.pop(name)


def put(name, value):
    return lambda state: state.__setitem__(name, value)


def nan_at(name):
    def change(state):
        state[name][0, 0] = float("nan")

    return change


def more_layers(config):
    return {**config, "encoder_layers": config["encoder_layers"] + 1}


@pytest.mark.parametrize(
    "damage, fragments",
    [
        (dict(tensors=drop(LAYER_WEIGHT)), [LAYER_WEIGHT, "missing"]),
        (dict(tensors=drop("final_logits_bias")), ["'final_logits_bias'", "missing"]),
        (dict(config=more_layers), ["model.encoder.layers.", "missing"]),
        (
            dict(tensors=put("model.encoder.layers.7.fc1.weight", torch.zeros(2))),
            ["layers.7.fc1", "unexpected"],
        ),
        (dict(tensors=put(LAYER_WEIGHT, torch.zeros(3, 3))), [LAYER_WEIGHT, "shape (3, 3)"]),
        (dict(tensors=nan_at(LAYER_WEIGHT)), [LAYER_WEIGHT, "NaN"]),
        (dict(tensors=nan_at("model.shared.weight")), ["model.shared.weight", "NaN"]),
        (dict(config=lambda c: [c]), ["config.json", "JSON object", "list"]),
        (dict(config=lambda c: {**c, "d_model": "32"}), ["config.json", "d_model", '"32"']),
        (dict(config=lambda c: {**c, "scale_embedding": "yes"}), ["scale_embedding", "true or false"]),
        (dict(config=lambda c: {**c, "pad_token_id": 100000}), ["pad id 100000"]),
        (dict(vocab=lambda v: dict(list(v.items())[: len(v) * 3 // 4])), ["vocab.json", "embedding rows"]),
        (dict(vocab=lambda v: {**v, "▁extra": len(v)}), ["vocab.json", "embedding rows"]),
        (dict(vocab=lambda v: {**v, next(iter(v)): "0"}), ["vocab.json", "not an integer"]),
        (dict(vocab=lambda v: list(v)), ["vocab.json", "JSON object"]),
    ],
    ids=[
        "missing-tensor",
        "missing-bias",
        "config-more-layers",
        "unexpected-tensor",
        "wrong-shape",
        "nan-weight",
        "nan-embedding",
        "config-not-object",
        "config-string-int",
        "config-string-bool",
        "config-pad-out-of-range",
        "vocab-smaller",
        "vocab-larger",
        "vocab-string-id",
        "vocab-not-object",
    ],
)
def test_import_refuses_a_damaged_folder(marian, tmp_path, damage, fragments):
    import_fails(damaged(marian, tmp_path, **damage), tmp_path, *fragments)


def test_import_refuses_another_models_sentencepiece(marian, tmp_path):
    import io

    import sentencepiece as spm

    other = io.BytesIO()
    rng = random.Random(0)
    words = ["".join(rng.choice("qxzjkvwy0123456789") for _ in range(6)) for _ in range(300)]
    text = [" ".join(rng.choice(words) for _ in range(9)) for _ in range(300)]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_writer=other, vocab_size=60, num_threads=1, minloglevel=2
    )
    folder = damaged(marian, tmp_path)
    (folder / "source.spm").write_bytes(other.getvalue())
    import_fails(folder, tmp_path, "source.spm", "not in vocab.json", "does not belong")


def test_import_refuses_pickled_weights(marian, tmp_path):
    from safetensors.torch import load_file

    folder = damaged(marian, tmp_path)
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    import_fails(folder, tmp_path, "pytorch_model.bin", "pickle")


def test_import_refuses_unreadable_safetensors(marian, tmp_path):
    folder = damaged(marian, tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    import_fails(folder, tmp_path, "model.safetensors")


# -- item 3: a full disk during the Hugging Face export -----------------------------------------


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def safetensors_no_space(*args, **kwargs):
    """What safetensors (Rust) raises when the disk is full: not an OSError."""
    from safetensors import SafetensorError

    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def stages(err: str) -> tuple[list[str], str]:
    """The export's stage lines (``export: read ...``: their first words), and the rest of stderr."""
    lines = err.splitlines()
    said = [line.split()[1] for line in lines if line.startswith("export: ")]
    return said, "\n".join(line for line in lines if not line.startswith("export: "))


@pytest.mark.parametrize("where", ["tokenizer-file", "weights"])
@pytest.mark.parametrize("previous", [False, True])
def test_full_disk_during_huggingface_export(monkeypatch, ckpt, tmp_path, where, previous):
    require("transformers", "safetensors")
    out = tmp_path / "hf"
    if previous:
        code, _, err = export(ckpt, out, fmt="huggingface")
        assert code == 0, err
    before = snapshot(out) if previous else None
    if where == "tokenizer-file":
        monkeypatch.setattr(Path, "write_bytes", no_space)
    else:
        import safetensors.torch
        import transformers.modeling_utils

        monkeypatch.setattr(safetensors.torch, "save_file", safetensors_no_space)
        monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", safetensors_no_space)
    code, _, err = export(ckpt, out, "--force", fmt="huggingface")
    said, err = stages(err)
    assert said == ["read"], said  # the stage that ended before the disk filled, then the one error
    assert_user_error(code, err, "No space left on device")
    assert (snapshot(out) == before) if previous else not out.exists()
    assert hidden_leftovers(tmp_path) == []


# --- checked by subject here (they were once in a file named after the round they were written in)
FIXTURE_CKPT = Path(__file__).parent / "fixtures" / "c46ef86" / "translation_step3.pt"
FIXTURE_CONFIG = Path(__file__).parent / "fixtures" / "c46ef86" / "config.yaml"


def test_ctranslate2_lets_the_length_limit_win_over_min_length_as_torch_does(tmp_path):
    pytest.importorskip("ctranslate2")
    import shutil

    ckpt = tmp_path / "mt.pt"  # a copy: the export is cached beside the checkpoint
    shutil.copy(FIXTURE_CKPT, ckpt)
    argv = ["translate", "--checkpoint", ckpt, "--beam", "1", "--min-length", "500", "--max-len-b", "6"]
    for engine in ("torch", "ctranslate2"):
        code, out, err = cli(*argv, "--engine", engine, stdin=b"Ein Hund.\n")
        assert code == 0 and "Traceback" not in err, err
        assert len(out.split()) <= 1.5 * 4 + 6  # within the length limit, eos included


def test_a_hugging_face_export_is_readable_by_all_and_quiet(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "hf"
    code, _, err = cli("export", "--checkpoint", FIXTURE_CKPT, "--format", "huggingface", "--out", out)
    assert code == 0 and "sacremoses" not in err, err
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, modes  # model.safetensors was 0600


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "vocabulary", "config"])
def test_a_damaged_ctranslate2_cache_is_made_again_not_used(tmp_path, damage):
    pytest.importorskip("ctranslate2")
    import shutil

    ckpt = tmp_path / "mt.pt"
    shutil.copy(FIXTURE_CKPT, ckpt)
    argv = ["translate", "--checkpoint", ckpt, "--engine", "ctranslate2", "--beam", "1"]
    code, sound, err = cli(*argv, stdin=b"Ein Hund.\nZwei Hunde.\n")
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
    code, again, err = cli(*argv, stdin=b"Ein Hund.\nZwei Hunde.\n")
    assert code == 0 and "damaged" in err and "Traceback" not in err, err
    assert again == sound  # the export made again, never the damaged one


def test_ctranslate2_refuses_a_language_model_before_exporting_it(tmp_path):
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
    code, _, err = cli(*argv, stdin=b"A dog\n")
    assert_user_error(code, err, "holds a language model")
    assert not (tmp_path / "lm.pt.ct2").exists()  # nothing exported for nothing


@pytest.mark.slow
def test_import_takes_a_hub_id_from_the_hub_s_cache_and_says_what_to_do_offline(tmp_path):
    pytest.importorskip("transformers")
    folder = tmp_path / "hf"
    assert cli("export", "--checkpoint", FIXTURE_CKPT, "--format", "huggingface", "--out", folder)[0] == 0
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
