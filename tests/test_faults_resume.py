"""Fault suite, ``--resume``: a change that would make the resumed run differ from the uninterrupted one
(the data, the tokenizer, the batching, the optimizer, the schedule, the model), and a max_steps that
leaves nothing to train, are one-line errors naming the key and both values; the run is left as it was.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.errors import ConfigError
from attnkit.train import load_config, train
from attnkit.train.resume_checks import check_resume
from cli_helpers import TINY_CONFIG, assert_user_error, cli

STEPS = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory, shared_data) -> tuple[Path, Path, Path]:
    """(config, run folder, its last checkpoint): TINY_CONFIG trained for STEPS steps."""
    root = tmp_path_factory.mktemp("resume")
    config = root / "tiny.yaml"
    config.write_text(TINY_CONFIG, encoding="utf-8")
    out = root / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = load_config(
            config,
            [
                f"data.data_dir={shared_data}",
                f"output_dir={out}",
                "data.max_train_pairs=100",
                f"train.max_steps={STEPS}",
                f"valid.every={STEPS}",
            ],
        )
        result = train(cfg, log=lambda m: None)
    finally:
        torch.set_num_threads(threads)
    return config, out, result.last_checkpoint


def resume(capsys, run, shared_data, *overrides: str) -> tuple[int, str, str]:
    config, out, last = run
    base = ["data.max_train_pairs=100", f"train.max_steps={STEPS + 2}", f"valid.every={STEPS}"]
    return cli(
        capsys,
        "train",
        "--config",
        config,
        "--data-dir",
        shared_data,
        "--output-dir",
        out,
        "--resume",
        last,
        *base,
        *overrides,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Resolved:
    """Stands for the model config build() resolves (``to_dict`` is all check_resume reads)."""

    def __init__(self, values: dict):
        self.values = values

    def to_dict(self) -> dict:
        return self.values


@pytest.mark.parametrize(
    "override, key, was, says",
    [
        ("data.src_lang=fr", "data.src_lang", "'de'", "'fr'"),
        ("data.max_len=64", "data.max_len", "128", "64"),
        ("data.max_train_pairs=90", "data.max_train_pairs", "100", "90"),
        ("tokenizer.vocab_size=200", "tokenizer.vocab_size", "300", "200"),
        ("train.max_tokens=900", "train.max_tokens", "1000", "900"),
        ("train.accumulate=2", "train.accumulate", "1", "2"),
        ("train.seed=7", "train.seed", "1", "7"),
        ("train.lr=0.02", "train.lr", "0.01", "0.02"),
        ("train.label_smoothing=0.2", "train.label_smoothing", "0.1", "0.2"),
        ("train.precision=bf16", "train.precision", "'auto'", "'bf16'"),
        ("train.cooldown_steps=2", "train.cooldown_steps", "0", "2"),
    ],
)
def test_resume_refuses_a_change_to_what_is_trained(capsys, run, shared_data, override, key, was, says):
    before = digest(run[2])
    code, out, err = resume(capsys, run, shared_data, override)
    assert_user_error(code, err, "--resume", key, f"was {was}", f"says {says}", "config.yaml")
    assert out == "" and digest(run[2]) == before
    assert load_checkpoint(run[2])["step"] == STEPS


def test_resume_names_the_model_field_that_differs(capsys, run, shared_data):
    code, _, err = resume(capsys, run, shared_data, "model.d_ff=48")
    assert_user_error(code, err, "different model", "model.d_ff", "48")
    code, _, err = resume(capsys, run, shared_data, "model.arch=rnn")
    assert_user_error(code, err, "different model", "model.arch", "'transformer'", "'rnn'")


def test_resume_with_max_steps_below_the_checkpoint_is_an_error(capsys, run, shared_data):
    code, out, err = resume(capsys, run, shared_data, "train.max_steps=1")
    assert_user_error(code, err, "train.max_steps=1", f"step {STEPS}")
    assert out == "" and "best checkpoint" not in err


def test_resume_at_max_steps_is_not_refused(run):
    """A run killed after writing its last step is resumed at max_steps to finish (test_faults_training)."""
    config, _, last = run
    state = load_checkpoint(last)
    cfg = load_config(config, ["data.max_train_pairs=100", f"train.max_steps={STEPS}"])
    check_resume(state, cfg, _Resolved(state["model_config"]), path=str(last))  # type: ignore[arg-type]


def test_old_checkpoints_without_newer_keys_compare_equal_to_the_defaults(run, shared_data):
    """A key the checkpoint's attnkit did not have yet is its default; the allowed keys may change."""
    config, out, last = run
    state = load_checkpoint(last)
    experiment = state["experiment"]
    for section, key in (("data", "mix"), ("data", "prepared"), ("tokenizer", "max_sentences")):
        del experiment[section][key]
    del experiment["train"]["cooldown_steps"]
    allowed = [
        f"data.data_dir={shared_data}",
        "data.max_train_pairs=100",
        "train.max_steps=50",
        "train.max_minutes=5",
        "train.max_epochs=9",
        "train.log_every=3",
        "train.progress=true",
        "train.device=cpu",
        "train.compile=true",
        "valid.every=7",
        "valid.beam_size=2",
        f"output_dir={out / 'elsewhere'}",
    ]
    cfg = load_config(config, allowed)
    model_cfg = load_checkpoint(last)["model_config"]

    class Resolved:  # the model config build() resolves: the checkpoint's own here
        def to_dict(self):
            return model_cfg

    check_resume(state, cfg, Resolved(), path=str(last))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tokenizer.max_sentences was 2000000"):
        check_resume(
            state, load_config(config, [*allowed, "tokenizer.max_sentences=5000"]), Resolved(), path="x"
        )  # type: ignore[arg-type]


def test_a_learning_rate_that_noam_would_ignore_is_a_config_error(capsys, tmp_path):
    """Under noam the peak comes from lr_scale, d_model and warmup: a set train.lr is refused, not dropped."""
    config = tmp_path / "noam.yaml"
    config.write_text("train: {schedule: noam, lr: 0.001}\n", encoding="utf-8")
    code, out, err = cli(capsys, "train", "--config", config, "--output-dir", tmp_path / "run")
    assert_user_error(code, err, "train.lr = 0.001", "noam", "train.lr_scale", "inverse_sqrt")
    assert out == "" and not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="train.lr = 0.002 is not used by schedule noam"):
        load_config(None, ["train.lr=0.002"])  # noam is the default schedule
    for ok in (["train.lr_scale=2"], ["train.lr=0.0005"], ["train.schedule=inverse_sqrt", "train.lr=0.002"]):
        load_config(None, ok)


def test_resuming_a_noam_run_ignores_the_lr_it_never_used(run):
    """An older noam run's config may hold any train.lr (noam never read it): it does not block --resume."""
    config, _, last = run
    state = load_checkpoint(last)
    state["experiment"]["train"].update(schedule="noam", lr=0.001, warmup_steps=10)
    cfg = load_config(config, ["data.max_train_pairs=100", "train.schedule=noam", "train.lr=0.0005"])
    check_resume(state, cfg, _Resolved(state["model_config"]), path=str(last))  # type: ignore[arg-type]
    state["experiment"]["train"]["schedule"] = "inverse_sqrt"  # but inverse_sqrt read it
    with pytest.raises(ConfigError, match="train.schedule was 'inverse_sqrt'"):
        check_resume(state, cfg, _Resolved(state["model_config"]), path=str(last))  # type: ignore[arg-type]


def test_resume_at_max_steps_says_there_is_nothing_to_train(capsys, run, shared_data, tmp_path):
    """Resumed at its last step into a new folder: exit 0, saying so (not 'best checkpoint: None')."""
    config, _, last = run
    code, out, err = cli(
        capsys,
        "train",
        "--config",
        config,
        "--resume",
        last,
        "--data-dir",
        shared_data,
        "--output-dir",
        tmp_path / "again",
        "data.max_train_pairs=100",
        f"train.max_steps={STEPS}",
        f"valid.every={STEPS}",
    )
    assert code == 0, err
    assert "nothing to train" in err and "None" not in out and "no best checkpoint" in out, (out, err)
