"""model.arch: classifier through `attnkit train`: tsv, Hugging Face and Multi30k language-id data, the
label set stored in the checkpoint, best by macro-F1, the metrics CSV, exact resume, and the commands
that read the result (classify, evaluate, attention). Bad labelled data: one line naming file and line."""

from __future__ import annotations

import csv
import random

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.train import load_config, train
from cli_helpers import assert_png, assert_user_error, cli

ANIMALS, PEOPLE = ["dog", "cat", "horse", "bird"], ["man", "woman", "child", "girl"]
FILLER = ["runs", "sits", "on", "the", "grass", "in", "snow", "a", "big", "small", "red", "near"]
LABELS = ["animal", "person"]

CONFIG = """\
data: {{corpus: tsv, train_files: [{d}/train.tsv], valid_files: [{d}/valid.tsv], test_files: [{d}/test.tsv]}}
tokenizer: {{vocab_size: 40}}
model: {{arch: {arch}, preset: tiny, pooling: attention}}
train: {{max_steps: 6, max_tokens: 300, schedule: inverse_sqrt, lr: 0.01, warmup_steps: 2, progress: false,
         log_every: 2, label_smoothing: 0.0}}
valid: {{every: 2, keep_last: 2}}
output_dir: {d}/run
"""


def sentences(n: int, seed: int) -> list[tuple[str, str]]:
    """(label, text): the label is the kind of the one subject word among filler words."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = LABELS[i % 2]
        words = rng.sample(FILLER, 4)
        words.insert(rng.randrange(5), rng.choice(ANIMALS if label == "animal" else PEOPLE))
        rows.append((label, " ".join(words)))
    return rows


def write_tsv(path, rows, header: bool = False):
    path.write_text(
        ("label\ttext\n" if header else "") + "".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8"
    )
    return path


@pytest.fixture
def tsv_run(tmp_path):
    """A folder with train/valid/test.tsv and a config whose model.arch is transformer (overridden)."""
    torch.set_num_threads(1)
    write_tsv(tmp_path / "train.tsv", sentences(120, 0), header=True)
    write_tsv(tmp_path / "valid.tsv", sentences(20, 1))
    write_tsv(tmp_path / "test.tsv", sentences(20, 2))
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(d=tmp_path, arch="transformer"), encoding="utf-8")
    return tmp_path, config


def test_attnkit_train_model_arch_classifier_on_a_tsv_corpus(tsv_run, capsys):
    d, config = tsv_run
    code, out, err = cli(capsys, "train", "--config", config, "model.arch=classifier")
    assert code == 0, err
    assert "best checkpoint:" in out and "valid macro_f1" in out
    with (d / "run" / "metrics.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames[-3:] == ["val_loss", "val_accuracy", "val_macro_f1"]
        rows = [r for r in reader if r["val_macro_f1"]]
    steps, f1 = [int(r["step"]) for r in rows], [float(r["val_macro_f1"]) for r in rows]
    assert steps == [2, 4, 6]
    best = load_checkpoint(d / "run" / "checkpoint_best.pt")
    assert best["arch"] == "classifier" and best["labels"] == LABELS
    assert best["model_config"]["n_classes"] == 2
    assert best["step"] == steps[f1.index(max(f1))]  # the first validation with the highest macro-F1
    assert load_checkpoint(d / "run" / "checkpoint_last.pt")["labels"] == LABELS

    ckpt = d / "run" / "checkpoint_best.pt"
    (d / "in.txt").write_text("a dog runs\nthe girl sits\n", encoding="utf-8")
    code, out, err = cli(capsys, "classify", "--checkpoint", ckpt, "--input", d / "in.txt", "--top-k", "2")
    assert code == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert len(lines) == 2 and all(len(f) == 4 and {f[0], f[2]} == set(LABELS) for f in lines)
    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt)  # the config's test_files
    assert code == 0, err
    assert "test.tsv: 20 examples" in out and "macro-F1" in out
    code, out, err = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        ckpt,
        "--input",
        d / "valid.tsv",
        "--confusion",
        d / "confusion.png",
    )
    assert code == 0, err
    assert_png(d / "confusion.png")
    code, out, err = cli(
        capsys, "attention", "--checkpoint", ckpt, "--text", "a dog runs", "--out", d / "review"
    )
    assert code == 0, err
    assert (d / "review.html").is_file()
    assert_png(d / "review.png")


def test_classifier_resume_continues_exactly(tsv_run):
    d, config = tsv_run

    def cfg(out, steps):
        return load_config(
            config,
            [
                "model.arch=classifier",
                f"output_dir={d / out}",
                f"train.max_steps={steps}",
                "valid.every=3",
                "model.dropout=0.1",
            ],
        )

    straight = train(cfg("a", 6), log=lambda m: None)
    half = train(cfg("b", 3), log=lambda m: None)
    resumed = train(cfg("b", 6), resume=half.last_checkpoint, log=lambda m: None)
    a, b = load_checkpoint(straight.last_checkpoint), load_checkpoint(resumed.last_checkpoint)
    assert a["step"] == b["step"] == 6 and a["labels"] == b["labels"] == LABELS
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    assert a["metrics"]["best_score"] == b["metrics"]["best_score"]


def test_a_hugging_face_dataset_with_text_and_label_fields(tmp_path):
    datasets = pytest.importorskip("datasets")
    torch.set_num_threads(1)
    features = datasets.Features(
        {"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["animal", "person"])}
    )

    def split(rows):
        return datasets.Dataset.from_dict(
            {"sentence": [t for _, t in rows], "label": [LABELS.index(a) for a, _ in rows]}, features=features
        )

    ds = tmp_path / "ds"
    datasets.DatasetDict(
        {"train": split(sentences(60, 0)), "validation": split(sentences(10, 1))}
    ).save_to_disk(ds)
    cfg = load_config(
        None,
        [
            "data.corpus=hf",
            f"data.dataset={ds}",
            "data.text_field=sentence",
            "data.label_field=label",
            "data.valid_split=validation",
            "data.test_split=validation",
            "tokenizer.vocab_size=40",
            "model.arch=classifier",
            "model.preset=tiny",
            "train.max_steps=2",
            "train.max_tokens=300",
            "train.progress=false",
            "valid.every=2",
            f"output_dir={tmp_path / 'run'}",
        ],
    )
    result = train(cfg, log=lambda m: None)
    assert result.metric == "macro_f1" and load_checkpoint(result.best_checkpoint)["labels"] == LABELS


def test_multi30k_language_id_corpus(shared_data, tmp_path, capsys):
    from attnkit.data import Multi30kLangIdSpec, load_corpus

    examples = load_corpus(Multi30kLangIdSpec("val", ("de", "en", "fr"), 3, shared_data))
    assert [e.label for e in examples[:6]] == ["de", "en", "fr"] * 2  # interleaved: every class early
    assert all(1 <= len(e.text.split()) <= 3 for e in examples)
    torch.set_num_threads(1)
    code, out, err = cli(
        capsys,
        "train",
        "--config",
        "configs/multi30k_langid_first3.yaml",
        "--data-dir",
        shared_data,
        "data.max_train_pairs=200",
        "data.max_valid_pairs=40",
        "tokenizer.vocab_size=300",
        "train.max_steps=2",
        "train.progress=false",
        "valid.every=2",
        "--output-dir",
        tmp_path / "run",
    )
    assert code == 0, err
    assert load_checkpoint(tmp_path / "run" / "checkpoint_best.pt")["labels"] == ["cs", "de", "en", "fr"]


@pytest.mark.parametrize(
    "split, content, fragments",
    [
        ("valid", b"animal\ta dog\nrobot\ta robot runs\n", ["valid.tsv:2", "unknown label 'robot'"]),
        ("valid", b"animal\ta dog\nperson a man without a tab\n", ["valid.tsv:2", "no tab"]),
        ("train", b"label\ttext\nanimal\t  \nperson\ta man\n", ["train.tsv:2", "empty text"]),
        ("train", b"animal\ta dog\nperson\ta m\xe4n\n", ["train.tsv:2", "not valid UTF-8"]),
    ],
)
def test_bad_labelled_lines_are_one_line_naming_file_and_line(tsv_run, capsys, split, content, fragments):
    d, config = tsv_run
    (d / f"{split}.tsv").write_bytes(content)
    code, out, err = cli(capsys, "train", "--config", config, "model.arch=classifier")
    assert_user_error(code, err, *fragments)
    assert not (d / "run").exists()


def test_unknown_label_in_the_test_split_is_named_by_evaluate(tsv_run, capsys):
    d, config = tsv_run
    assert cli(capsys, "train", "--config", config, "model.arch=classifier", "train.max_steps=2")[0] == 0
    write_tsv(d / "test.tsv", [("animal", "a dog"), ("plant", "a tree")])
    code, out, err = cli(capsys, "evaluate", "--checkpoint", d / "run" / "checkpoint_best.pt")
    assert_user_error(code, err, "test.tsv:2", "unknown label 'plant'")


def test_a_classifier_needs_labelled_data_and_a_translation_model_pairs(tsv_run, capsys, tmp_path):
    d, config = tsv_run
    (d / "a.txt").write_text("a dog\n", encoding="utf-8")
    code, out, err = cli(
        capsys,
        "train",
        "--config",
        config,
        "model.arch=classifier",
        "data.corpus=text",
        f"data.train_files=[{d / 'a.txt'}]",
        f"data.valid_files=[{d / 'a.txt'}]",
        "data.test_files=[]",
    )
    assert_user_error(code, err, "gives text records", "needs a labelled corpus")
    code, out, err = cli(capsys, "train", "--config", config, "model.arch=classifier", "model.n_classes=3")
    assert_user_error(code, err, "model.n_classes = 3 contradicts the training data's 2")


def test_bench_task_run_trains_through_the_trainer_and_scores_the_test_split(tsv_run, capsys):
    import json

    from bench import task_run

    d, config = tsv_run
    task_run.main([str(config), "model.arch=classifier", "train.max_steps=2", "--threads", "1"])
    summary = json.loads((d / "run" / "task_run.json").read_text())
    assert summary["steps"] == 2 and summary["valid_metric"] == "macro_f1"
    assert 0.0 <= summary["test_accuracy"] <= 1.0 and summary["test_split"].endswith("test.tsv")
