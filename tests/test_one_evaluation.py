"""One evaluation per task: the trainer's validation and ``attnkit evaluate`` print the same number.

Each task scores a split through one function (:mod:`attnkit.tasks`), so a checkpoint's validation
perplexity, BLEU and accuracy equal what ``attnkit evaluate`` gives on the same split with the same
options (to the digits each prints). Also: no module outside the registry compares architecture names.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import torch

from attnkit.train import load_config, train
from cli_helpers import TINY_CONFIG, cli
from test_train_classifier import sentences, write_tsv
from test_train_lm import TINY_LM

SRC = Path(__file__).resolve().parents[1] / "src" / "attnkit"


def last_validation(run: Path) -> dict[str, float]:
    with (run / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if any(k.startswith("val_") and v for k, v in r.items())]
    return {k: float(v) for k, v in rows[-1].items() if k.startswith("val_") and v}


def printed(out: str, name: str) -> float:
    match = re.search(rf"^{name}\s+([0-9.]+)", out, flags=re.M)
    assert match, out
    return float(match.group(1))


def test_validation_perplexity_is_what_evaluate_prints(tmp_path, capsys, shared_data):
    torch.set_num_threads(1)
    overrides = [
        *TINY_LM,
        "data.max_valid_pairs=0",
        "train.max_steps=4",
        "valid.every=4",
        f"output_dir={tmp_path}",
    ]
    train(load_config(None, overrides), log=lambda m: None)
    want = last_validation(tmp_path)["val_perplexity"]
    code, out, err = cli(
        capsys, "evaluate", "--checkpoint", tmp_path / "checkpoint_last.pt", "--split", "val"
    )
    assert code == 0, err
    assert printed(out, "perplexity") == pytest.approx(want, abs=2e-3)


@pytest.mark.slow
def test_validation_bleu_is_what_evaluate_prints_with_the_same_beam(tmp_path, capsys, shared_data):
    torch.set_num_threads(1)
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_CONFIG)
    extra = [
        "data.max_valid_pairs=0",
        "valid.beam_size=2",
        "train.max_steps=10",
        "valid.every=10",
        f"data.data_dir={shared_data}",
        f"output_dir={tmp_path / 'run'}",
    ]
    train(load_config(config, extra), log=lambda m: None)
    want = last_validation(tmp_path / "run")["val_bleu"]
    ckpt = tmp_path / "run" / "checkpoint_last.pt"
    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt, "--split", "val", "--beam", "2")
    assert code == 0, err
    assert printed(out, "BLEU") == pytest.approx(want, abs=6e-3)


def test_validation_accuracy_is_what_evaluate_prints(tmp_path, capsys):
    torch.set_num_threads(1)
    write_tsv(tmp_path / "train.tsv", sentences(120, 0))
    write_tsv(tmp_path / "valid.tsv", sentences(20, 1))
    config = tmp_path / "config.yaml"
    config.write_text(
        f"data: {{corpus: tsv, train_files: [{tmp_path}/train.tsv], valid_files: [{tmp_path}/valid.tsv]}}\n"
        "tokenizer: {vocab_size: 40}\nmodel: {arch: classifier, preset: tiny, pooling: attention}\n"
        "train: {max_steps: 4, max_tokens: 300, schedule: inverse_sqrt, lr: 0.01, warmup_steps: 2,\n"
        "        progress: false}\n"
        f"valid: {{every: 4}}\noutput_dir: {tmp_path}/run\n"
    )
    train(load_config(config), log=lambda m: None)
    want = last_validation(tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoint_last.pt"
    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt, "--input", tmp_path / "valid.tsv")
    assert code == 0, err
    assert printed(out, "accuracy") == pytest.approx(want["val_accuracy"], abs=1e-4)
    assert printed(out, "macro-F1") == pytest.approx(want["val_macro_f1"], abs=1e-4)


ARCH_NAMES = re.compile(r"""["'](transformer|rnn|lm|classifier)["']""")
REGISTRIES = {
    "tasks/translation/__init__.py",
    "tasks/language_model/__init__.py",
    "tasks/classification/__init__.py",
    "model/registry.py",
}


def test_architecture_names_are_compared_only_in_the_registries():
    """The arch -> task map is written once: no other module spells an architecture's name."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in REGISTRIES:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#")[0]
            if ARCH_NAMES.search(code) and "arch" in code:
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_every_model_arch_has_exactly_one_built_in_task():
    """A config without ``task:`` finds its arch's task; a plugin may share an arch (by name only)."""
    from attnkit.model.registry import ARCHS
    from attnkit.plugin import task_of_arch, tasks
    from attnkit.plugin.registry import BUILT_IN

    archs = [arch for task in tasks() if task.name in BUILT_IN for arch in task.archs]
    assert sorted(archs) == sorted(ARCHS) and len(set(archs)) == len(archs)
    assert all(arch in task_of_arch(arch).archs and task_of_arch(arch).name in BUILT_IN for arch in ARCHS)
