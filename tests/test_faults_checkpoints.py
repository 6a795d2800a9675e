"""Fault suite, checkpoints and output files: damaged, foreign and duplicate checkpoints, a full disk.

Issue 9 items 3 (average compares tokenizers), 5 (damaged weights are detected), 7 (a full disk
leaves earlier files intact and no temporary files, and is one line with exit 2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import FORMAT, average_checkpoints, load_checkpoint, save_checkpoint
from attnkit.errors import CheckpointError
from attnkit.tasks.translation import Translator
from fault_helpers import (
    DiskFull,
    assert_user_error,
    cli,
    make_state,
    make_tokenizer,
    stray_files,
    write_checkpoint,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tokenizers():
    return make_tokenizer(seed=0), make_tokenizer(seed=7)


@pytest.fixture
def ckpt(tmp_path, tokenizers) -> Path:
    return write_checkpoint(tmp_path / "model.pt", tokenizers[0])


def flip_tensor_bytes(path: Path, tensor: torch.Tensor, n: int = 64) -> None:
    """Invert ``n`` bytes in the middle of ``tensor``'s data inside the checkpoint file."""
    data = bytearray(path.read_bytes())
    raw = tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    start = data.find(raw)
    assert start >= 0, "tensor bytes not found in the file"
    middle = start + len(raw) // 2
    for i in range(middle, middle + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


# -- item 5: damaged weights --------------------------------------------------------------------


def largest_weight(path: Path) -> tuple[str, torch.Tensor]:
    weights = load_checkpoint(path)["model"]
    name = max(weights, key=lambda k: weights[k].numel())
    return name, weights[name]


def test_flipped_bytes_inside_a_weight_tensor_are_detected(ckpt):
    name, weight = largest_weight(ckpt)
    flip_tensor_bytes(ckpt, weight)
    with zipfile.ZipFile(ckpt):  # still a well-formed zip: only the tensor bytes changed
        pass
    with pytest.raises(CheckpointError, match=r"weights damaged \(checksum mismatch"):
        load_checkpoint(ckpt)


def test_damaged_checkpoint_is_one_line_and_exit_2_in_translate_and_average(ckpt, tmp_path, tokenizers):
    _, weight = largest_weight(ckpt)
    flip_tensor_bytes(ckpt, weight)
    code, out, err = cli("translate", "--checkpoint", ckpt, "--device", "cpu", stdin=b"Ein Hund.\n")
    assert_user_error(
        code, err, str(ckpt), "weights damaged (checksum mismatch in model/"
    )  # name or a tied alias
    assert out == ""
    other = write_checkpoint(tmp_path / "other.pt", tokenizers[0])
    code, _, err = cli("average", "--checkpoints", other, ckpt, "--output", tmp_path / "avg.pt")
    assert_user_error(code, err, "weights damaged")
    assert not (tmp_path / "avg.pt").exists()


def test_damaged_optimizer_state_is_detected(tmp_path, tokenizers):
    state = make_state(tokenizers[0])
    state["optimizer"] = {"state": {0: {"exp_avg": torch.arange(4096, dtype=torch.float32)}}}
    path = save_checkpoint(state, tmp_path / "train.pt")
    flip_tensor_bytes(path, state["optimizer"]["state"][0]["exp_avg"])
    with pytest.raises(CheckpointError, match=r"training state damaged .*optimizer/state/0/exp_avg"):
        load_checkpoint(path)


def test_a_checkpoint_without_checksums_still_loads(tmp_path, tokenizers):
    """Checkpoints written before checksums existed: same format, no ``crc32`` key."""
    state = make_state(tokenizers[0])
    path = tmp_path / "old.pt"
    torch.save({"format": FORMAT, **state}, path)
    loaded = load_checkpoint(path)
    assert "crc32" not in loaded
    for name, tensor in state["model"].items():
        assert torch.equal(loaded["model"][name], tensor)
    assert Translator.from_checkpoint(path, device="cpu").translate(["Ein Hund."], beam=1)


def test_saved_checksums_cover_every_tensor(ckpt):
    state = load_checkpoint(ckpt)
    assert set(state["crc32"]) == {f"model/{name}" for name in state["model"]}


def test_foreign_torch_files_are_refused(tmp_path):
    cases = {
        "plain_state_dict.pt": {"w": torch.zeros(3)},
        "tensor.pt": torch.zeros(3),
        "other_format.pt": {"format": "someone-else-1", "model": {}},
    }
    for name, obj in cases.items():
        torch.save(obj, tmp_path / name)
        code, _, err = cli("translate", "--checkpoint", tmp_path / name, stdin=b"x\n")
        assert_user_error(code, err, name, "not an attnkit checkpoint")


# -- item 3: average compares tokenizers --------------------------------------------------------


def test_average_refuses_checkpoints_with_different_sentencepiece_models(tmp_path, tokenizers):
    a = write_checkpoint(tmp_path / "a.pt", tokenizers[0], seed=0)
    b = write_checkpoint(tmp_path / "b.pt", tokenizers[1], seed=1)
    assert tokenizers[0].src_vocab_size == tokenizers[1].src_vocab_size  # same shapes: only ids differ
    assert load_checkpoint(a)["model_config"] == load_checkpoint(b)["model_config"]
    with pytest.raises(CheckpointError, match="different tokenizer"):
        average_checkpoints([a, b])
    code, _, err = cli("average", "--checkpoints", a, b, "--output", tmp_path / "avg.pt")
    assert_user_error(code, err, str(b), "different tokenizer")
    assert not (tmp_path / "avg.pt").exists()


def test_average_of_one_run_still_works(tmp_path, tokenizers):
    a = write_checkpoint(tmp_path / "a.pt", tokenizers[0], seed=0)
    b = write_checkpoint(tmp_path / "b.pt", tokenizers[0], seed=1)
    code, out, err = cli("average", "--checkpoints", a, b, "--output", tmp_path / "avg.pt")
    assert code == 0, err
    avg = load_checkpoint(tmp_path / "avg.pt")["model"]
    sa, sb = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    for name in avg:
        torch.testing.assert_close(avg[name], (sa[name] + sb[name]) / 2)


def test_average_refuses_a_checkpoint_listed_twice(tmp_path, ckpt):
    code, _, err = cli(
        "average", "--checkpoints", ckpt, tmp_path / "." / "model.pt", "--output", tmp_path / "x.pt"
    )
    assert_user_error(code, err, "listed twice")


def test_average_never_overwrites_one_of_its_inputs(tmp_path, tokenizers):
    a = write_checkpoint(tmp_path / "a.pt", tokenizers[0], seed=0)
    b = write_checkpoint(tmp_path / "b.pt", tokenizers[0], seed=1)
    before = b.read_bytes()
    code, _, err = cli("average", "--checkpoints", a, b, "--output", b)
    assert_user_error(code, err, "--output", "is the same file as --checkpoints")
    assert b.read_bytes() == before


def test_average_into_a_folder_names_the_folder(tmp_path, tokenizers):
    a = write_checkpoint(tmp_path / "a.pt", tokenizers[0], seed=0)
    b = write_checkpoint(tmp_path / "b.pt", tokenizers[0], seed=1)
    code, _, err = cli("average", "--checkpoints", a, b, "--output", tmp_path)
    assert_user_error(code, err, str(tmp_path), "is a folder")
    assert stray_files(tmp_path) == []


# -- item 7: a full disk ------------------------------------------------------------------------


def test_full_disk_while_saving_keeps_the_old_checkpoint_and_leaves_no_temporary_file(
    monkeypatch, tmp_path, tokenizers
):
    path = write_checkpoint(tmp_path / "checkpoint_last.pt", tokenizers[0], seed=0)
    before = path.read_bytes()
    DiskFull(monkeypatch, budget=4096)
    with pytest.raises(CheckpointError, match=f"cannot write checkpoint {path}: no space left on device"):
        save_checkpoint(make_state(tokenizers[0], seed=1), path)
    assert path.read_bytes() == before
    assert stray_files(tmp_path) == []


def test_full_disk_in_average_is_one_line_and_exit_2(monkeypatch, tmp_path, tokenizers):
    a = write_checkpoint(tmp_path / "a.pt", tokenizers[0], seed=0)
    b = write_checkpoint(tmp_path / "b.pt", tokenizers[0], seed=1)
    DiskFull(monkeypatch, budget=4096)
    code, _, err = cli("average", "--checkpoints", a, b, "--output", tmp_path / "avg.pt")
    assert_user_error(code, err, "avg.pt", "no space left on device")
    assert not (tmp_path / "avg.pt").exists() and stray_files(tmp_path) == []


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_full_disk_while_writing_output_keeps_the_old_file(monkeypatch, tmp_path, ckpt, command):
    src = tmp_path / "src.txt"
    src.write_text("Ein Hund.\n" * 200, encoding="utf-8")
    out = tmp_path / "out.txt"
    out.write_text("the previous output\n", encoding="utf-8")
    if command == "translate":
        argv = ["translate", "--checkpoint", ckpt, "--input", src, "--output", out]
    else:
        argv = ["evaluate", "--checkpoint", ckpt, "--src", src, "--ref", src, "--hyp-output", out]
    DiskFull(monkeypatch, budget=100)
    code, _, err = cli(*argv, "--beam", 1, "--device", "cpu")
    assert_user_error(code, err, "No space left on device", str(out))
    assert out.read_text(encoding="utf-8") == "the previous output\n"
    assert stray_files(tmp_path) == []


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A real 2 MiB tmpfs: needs root and a working ``mount`` (skipped with the reason otherwise)."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs root to mount a small tmpfs")
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    point = tmp_path / "tmpfs"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=False)


def fill(folder: Path, leave: int) -> None:
    """Fill the file system of ``folder`` up to ``leave`` free bytes."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    (folder / "filler").write_bytes(b"\0" * max(free - leave, 0))


def test_real_full_disk_checkpoint_and_output(tiny_tmpfs, tokenizers, tmp_path):
    small = write_checkpoint(tiny_tmpfs / "checkpoint_last.pt", tokenizers[0])
    before = small.read_bytes()
    state = make_state(tokenizers[0], seed=1)
    state["padding"] = torch.zeros(1024 * 1024)  # 4 MiB: more than the disk holds
    with pytest.raises(CheckpointError, match="no space left on device"):
        save_checkpoint(state, small)
    assert small.read_bytes() == before and stray_files(tiny_tmpfs) == []

    src = tmp_path / "src.txt"
    src.write_text("Ein Hund.\n" * 300, encoding="utf-8")
    out = tiny_tmpfs / "out.txt"
    fill(tiny_tmpfs, leave=8192)  # room to start, not to finish: 1,200 lines of "I<TAB>SCORE<TAB>TEXT"
    argv = ["translate", "--checkpoint", small, "--input", src, "--output", out, "--device", "cpu"]
    code, _, err = cli(*argv, "--beam", 4, "--nbest", 4)
    assert_user_error(code, err, "No space left on device", str(out))
    assert not out.exists() and stray_files(tiny_tmpfs) == []
    assert small.read_bytes() == before

    (tiny_tmpfs / "filler").unlink()
    fill(tiny_tmpfs, leave=0)  # nothing left: refused before any decoding
    code, _, err = cli(*argv, "--beam", 1)
    assert_user_error(code, err, "--output", "no space left on device")
    assert not out.exists() and stray_files(tiny_tmpfs) == []
