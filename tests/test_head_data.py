"""What ``attnkit heads`` and ``attnkit prune`` score on: the validation split by default, another
split, or files read as ``attnkit evaluate`` reads them; a classifier's labels come from its
checkpoint, so no training split is read; every wrong combination is one line and exit 2."""

from __future__ import annotations

import json

import pytest
import torch

from attnkit.checkpoint import save_checkpoint
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.model import ClassifierConfig, TransformerClassifier
from cli_helpers import assert_user_error, cli

TEXT = [
    f"{a} {b} {c} ."
    for a in ("A dog", "Two men", "A woman", "Three kids", "The cat")
    for b in ("runs", "sits", "plays", "walks", "sleeps")
    for c in ("on the grass", "in the snow", "at home")
]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """An untrained tiny classifier whose checkpoint holds its labels and no experiment config."""
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("clf")
    with pytest.warns(UserWarning, match="too small"):
        tok = SubwordTokenizer.train(TEXT, TEXT, vocab_size=200)
    cfg = ClassifierConfig.preset("tiny", vocab_size=tok.src_vocab_size, n_classes=2, pooling="attention")
    state = {
        "tokenizer": tok.state_dict(),
        "experiment": {},
        "arch": "classifier",
        "model_config": cfg.to_dict(),
        "labels": ["animal", "person"],
        "model": TransformerClassifier(cfg).state_dict(),
    }
    return save_checkpoint(state, out / "clf.pt")


def test_a_classifier_is_scored_on_a_labelled_file(classifier, tmp_path, capsys):
    data = tmp_path / "in.tsv"
    data.write_text("animal\tA dog runs .\nperson\tTwo men sit at home .\nanimal\tThe cat sleeps .\n")
    out = tmp_path / "heads"
    code, _, err = cli(capsys, "heads", "--checkpoint", classifier, "--out", out, "--input", data)
    assert code == 0, err
    result = json.loads((out / "heads.json").read_text())
    assert result["metric"] == "macro_f1" and result["examples"] == 3 and result["data"] == str(data)
    assert {r["kind"] for r in result["heads"]} == {"encoder"}
    assert all(r["importance"] >= 0 and r["macro_f1_drop"] is not None for r in result["heads"])
    # a label the checkpoint does not know is named with its line
    data.write_text("plant\tA tree .\n")
    code, _, err = cli(capsys, "heads", "--checkpoint", classifier, "--out", out, "--input", data)
    assert_user_error(code, err, "plant")


def test_without_an_experiment_config_files_are_needed(classifier, tmp_path, capsys):
    code, _, err = cli(capsys, "heads", "--checkpoint", classifier, "--out", tmp_path / "h")
    assert_user_error(code, err, "no experiment config")


def test_restore_gives_a_classifier_task_its_labels_without_the_training_split():
    from attnkit.tasks.classification import ClassifierTask

    task = ClassifierTask()
    task.restore({"labels": ["b", "a", "c"]})
    assert task.labels == ["b", "a", "c"] and task.model_fields() == {"n_classes": 3}


@pytest.mark.slow
def test_a_translation_is_scored_on_its_own_files_and_on_a_named_split(runs, tmp_path, capsys):
    out = tmp_path / "heads"
    args = ["heads", "--checkpoint", runs.ckpt, "--out", out, "--no-metric", "--max-sentences", 5]
    code, _, err = cli(capsys, *args, "--src", runs.eval_src, "--ref", runs.eval_ref)
    assert code == 0, err
    result = json.loads((out / "heads.json").read_text())
    assert result["examples"] == 5 and result["data"] == f"{runs.eval_src} -> {runs.eval_ref}"
    on_files = {(r["kind"], r["layer"], r["head"]): r["importance"] for r in result["heads"]}
    code, _, err = cli(capsys, *args, "--split", "test_2016_flickr", "--data-dir", runs.eval_data)
    assert code == 0, err
    result = json.loads((out / "heads.json").read_text())
    assert "test_2016_flickr" in result["data"]
    # the same five pairs, as a split or as files: the same importance
    for r in result["heads"]:
        assert r["importance"] == pytest.approx(on_files[(r["kind"], r["layer"], r["head"])], rel=1e-5)


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--input", "x.txt"], "--input is for"),
        (["--src", "x.de"], "--src and --ref go together"),
        (["--src", "x.de", "--ref", "x.en", "--split", "val"], "not with files"),
    ],
)
def test_wrong_data_flags_are_one_line(runs, tmp_path, capsys, extra, fragment):
    code, _, err = cli(capsys, "heads", "--checkpoint", runs.ckpt, "--out", tmp_path / "h", *extra)
    assert_user_error(code, err, fragment)
