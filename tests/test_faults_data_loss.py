"""Nothing the user had is lost: a resumed checkpoint never writes over another run, --overwrite
replaces only what attnkit wrote (at any depth), a file that appears in an output folder while a
command runs stays, and fine-tuning never replaces the checkpoint it starts from."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from attnkit.train import load_config, train
from cli_helpers import TINY_CONFIG, assert_user_error, cli

STEPS = 2


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, shared_data) -> tuple[Path, Path, Path]:
    """(config, run A, run B): TINY_CONFIG trained STEPS steps into two folders."""
    root = tmp_path_factory.mktemp("two_runs")
    config = root / "tiny.yaml"
    config.write_text(TINY_CONFIG, encoding="utf-8")
    runs = []
    for name in ("a", "b"):
        overrides = [f"data.data_dir={shared_data}", f"output_dir={root / name}", "data.max_train_pairs=100"]
        overrides += [f"train.max_steps={STEPS}", f"valid.every={STEPS}"]
        train(load_config(config, overrides), log=lambda m: None)
        runs.append(root / name)
    return config, runs[0], runs[1]


def test_resuming_one_run_into_another_s_folder_is_refused(capsys, two_runs, shared_data):
    config, a, b = two_runs
    before = digests(b)
    argv = ["train", "--config", config, "--data-dir", shared_data, "--output-dir", b]
    argv += ["--resume", a / "checkpoint_last.pt", f"train.max_steps={STEPS + 1}", "data.max_train_pairs=100"]
    code, _, err = cli(capsys, *argv)
    assert_user_error(code, err, f"{b} holds another training run", f"--output-dir {a}")
    assert digests(b) == before  # B's checkpoints, metrics and curve untouched


def test_fine_tuning_never_replaces_its_own_starting_checkpoint(capsys, two_runs, shared_data):
    config, _, b = two_runs
    before = digests(b)
    start = b / "checkpoint_last.pt"
    argv = ["train", "--config", config, "--data-dir", shared_data, "--output-dir", b, "--overwrite"]
    code, _, err = cli(capsys, *argv, f"train.init_from={start}", "data.max_train_pairs=100")
    assert_user_error(code, err, "train.init_from", "copy it elsewhere")
    assert digests(b) == before


@pytest.mark.parametrize("own", ["images/holiday_1.png", "captions.tsv", "images/train_00000.png.bak"])
def test_overwrite_keeps_a_user_s_own_image_caption_files(capsys, tmp_path, own):
    out = tmp_path / "corpus"
    (out / "images").mkdir(parents=True)
    (out / own).write_bytes(b"the user's own")
    (out / "train.tsv").write_text("images/train_00000.png\ta red square\n")
    code, _, err = cli(
        capsys, "make-shapes", "--out", out, "--train", "2", "--valid", "1", "--test", "1", "--overwrite"
    )
    assert_user_error(code, err, "did not write", own)
    assert (out / own).read_bytes() == b"the user's own"


def test_overwrite_replaces_what_it_wrote_and_keeps_what_the_user_added(capsys, tmp_path):
    out = tmp_path / "corpus"
    small = ["make-shapes", "--out", out, "--train", "2", "--valid", "1", "--test", "1"]
    assert cli(capsys, *small)[0] == 0
    assert cli(capsys, *small, "--overwrite", "--seed", "3")[0] == 0  # its own files: replaced
    (out / "images" / "notes.txt").write_text("mine")
    code, _, err = cli(capsys, *small, "--overwrite")
    assert_user_error(code, err, "images/notes.txt")
    assert (out / "images" / "notes.txt").read_text() == "mine"


def test_a_file_that_appears_while_make_shapes_runs_stays(capsys, tmp_path, monkeypatch):
    from attnkit.tasks.captioning import shapes

    out = tmp_path / "corpus"
    draw = shapes.draw_scene

    def draw_and_meddle(*args, **kwargs):
        out.mkdir(exist_ok=True)
        (out / "thesis.txt").write_text("my thesis")
        return draw(*args, **kwargs)

    monkeypatch.setattr(shapes, "draw_scene", draw_and_meddle)
    code, _, err = cli(capsys, "make-shapes", "--out", out, "--train", "2", "--valid", "1", "--test", "1")
    assert_user_error(code, err, "changed while attnkit make-shapes ran", "thesis.txt")
    assert (out / "thesis.txt").read_text() == "my thesis"


def test_a_file_that_appears_while_prepare_runs_stays(capsys, tmp_path, monkeypatch, shared_data):
    from attnkit.data import prepare as module

    out = tmp_path / "prepared"
    write = module._write

    def write_and_meddle(*args):
        out.mkdir(exist_ok=True)
        (out / "thesis.txt").write_text("my thesis")
        return write(*args)

    monkeypatch.setattr(module, "_write", write_and_meddle)
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_CONFIG, encoding="utf-8")
    argv = [
        "prepare",
        "--config",
        config,
        "--data-dir",
        shared_data,
        "--output",
        out,
        "data.max_train_pairs=50",
    ]
    code, _, err = cli(capsys, *argv)
    last = err.strip().splitlines()[-1]  # after its progress lines
    assert code == 2 and "changed while attnkit prepare ran" in last and "thesis.txt" in last, err
    assert (out / "thesis.txt").read_text() == "my thesis"
