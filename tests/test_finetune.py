"""train.init_from: a new run from a checkpoint's weights and tokenizer, with a fresh optimizer,
schedule, step count, sampler and best score; train.freeze; the one-line refusals."""

import sys
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint, save_checkpoint
from attnkit.errors import CheckpointError, ConfigError
from attnkit.train import load_config, train
from test_train import TINY, read_csv

QUIET = {"log": lambda m: None}
ANIMALS = {"Hund": "dog", "Katze": "cat", "Pferd": "horse", "Vogel": "bird", "Fisch": "fish"}
VERBS = {"läuft": "runs", "schläft": "sleeps", "springt": "jumps", "frisst": "eats"}


def domain(tmp: Path) -> tuple[Path, Path]:
    """A small in-domain corpus: "ein Hund läuft" -> "a dog runs", every animal and verb."""
    pairs = [(f"ein {a} {v}", f"a {ae} {ve}") for a, ae in ANIMALS.items() for v, ve in VERBS.items()]
    tmp.mkdir(parents=True, exist_ok=True)
    train_tsv, valid_tsv = tmp / "domain_train.tsv", tmp / "domain_valid.tsv"
    train_tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs * 5), encoding="utf-8")
    valid_tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return train_tsv, valid_tsv


@pytest.fixture(scope="module")
def base(shared_data, tmp_path_factory) -> Path:
    """A tiny Multi30k model (the checkpoint fine-tunings start from)."""
    out = tmp_path_factory.mktemp("base")
    cfg = load_config(
        None,
        [f"data.data_dir={shared_data}", *TINY, f"output_dir={out}", "train.max_steps=30", "valid.every=30"],
    )
    return train(cfg, **QUIET).last_checkpoint


def tuned(tmp: Path, base: Path, *extra: str):
    """A fine-tuning of ``base`` on the in-domain corpus (its config names no model and no tokenizer)."""
    train_tsv, valid_tsv = domain(tmp)
    cfg = load_config(
        None,
        [
            "data.corpus=tsv",
            f"data.train_files=[{train_tsv}]",
            f"data.valid_files=[{valid_tsv}]",
            f"train.init_from={base}",
            "train.max_tokens=400",
            "train.schedule=constant",
            "train.lr=0.003",
            "train.warmup_steps=1",
            "train.progress=false",
            f"output_dir={tmp / 'run'}",
            *extra,
        ],
    )
    return cfg


def test_fine_tuning_raises_the_in_domain_score_from_fresh_state(tmp_path, base):
    before = train(
        tuned(tmp_path / "zero", base, "train.lr=1e-12", "train.max_steps=1", "valid.every=1"), **QUIET
    )
    after = train(tuned(tmp_path / "ft", base, "train.max_steps=60", "valid.every=60"), **QUIET)
    (b,), (a,) = (read_csv(r.metrics_csv)[-1:] for r in (before, after))
    assert (
        float(a["val_loss"]) < float(b["val_loss"]) - 1.0 and float(a["val_bleu"]) > float(b["val_bleu"]) + 20
    )
    start, state = load_checkpoint(base), load_checkpoint(after.last_checkpoint)
    assert state["step"] == 60 and state["tokenizer"] == start["tokenizer"]  # fresh count, the same tokenizer
    assert state["model_config"] == start["model_config"]
    assert len(state["optimizer"]["state"]) and state["optimizer"]["state"][0]["step"] == 60  # a fresh Adam


def test_the_first_step_starts_from_the_checkpoint_weights(tmp_path, base):
    run = train(tuned(tmp_path, base, "train.lr=1e-12", "train.max_steps=1", "valid.every=1"), **QUIET)
    start, state = load_checkpoint(base), load_checkpoint(run.last_checkpoint)
    for name, tensor in start["model"].items():
        assert torch.allclose(tensor, state["model"][name], atol=1e-9), name


@pytest.mark.slow
def test_resume_of_a_fine_tuning_is_exact(tmp_path, base):
    extra = ("model.dropout=0.2", "valid.every=4")
    straight = train(tuned(tmp_path / "a", base, *extra, "train.max_steps=8"), **QUIET)
    train(tuned(tmp_path / "b", base, *extra, "train.max_steps=4"), **QUIET)
    resumed = train(
        tuned(tmp_path / "b", base, *extra, "train.max_steps=8"),
        resume=tmp_path / "b" / "run" / "checkpoint_last.pt",
        **QUIET,
    )
    a, b = load_checkpoint(straight.last_checkpoint), load_checkpoint(resumed.last_checkpoint)
    assert a["model_config"]["dropout"] == 0.2  # the dropout the fine-tuning set
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


def test_freeze_keeps_the_named_parts_fixed(tmp_path, base):
    run = train(
        tuned(tmp_path, base, "train.max_steps=5", "valid.every=5", "train.freeze=[encoder]"), **QUIET
    )
    start, state = load_checkpoint(base)["model"], load_checkpoint(run.last_checkpoint)["model"]
    encoder = [n for n in start if n.startswith("encoder.")]
    assert encoder and all(torch.equal(start[n], state[n]) for n in encoder)
    decoder = [n for n in start if n.startswith("decoder_layers.")]
    assert decoder and all(not torch.equal(start[n], state[n]) for n in decoder if n.endswith("weight"))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["model.d_model=64"], "model.d_model = 64 contradicts .* 32"),
        (["model.arch=rnn"], "holds a 'transformer' model"),
        (["tokenizer.model=[x.model]"], "remove tokenizer.model"),
        (["train.freeze=[decoder, encoder]"], None),  # the embeddings (tied to the output layer) train
        (["train.freeze=[decoder, encoder, embeddings]"], "nothing would train"),
        (["train.freeze=[head]"], "freeze"),
    ],
)
def test_contradictions_are_one_line_errors(tmp_path, base, extra, message):
    cfg_args = [*extra, "train.max_steps=1", "valid.every=1"]
    if message is None:
        train(tuned(tmp_path, base, *cfg_args), **QUIET)
        return
    with pytest.raises(ConfigError, match=message) as err:
        train(tuned(tmp_path, base, *cfg_args), **QUIET)
    assert "\n" not in str(err.value)


def test_a_missing_or_foreign_checkpoint_is_refused(tmp_path, base):
    with pytest.raises(CheckpointError, match="not found"):
        train(tuned(tmp_path, tmp_path / "nope.pt", "train.max_steps=1"), **QUIET)
    junk = tmp_path / "junk.pt"
    save_checkpoint({"hello": 1}, junk)
    with pytest.raises((CheckpointError, ConfigError)):
        train(tuned(tmp_path, junk, "train.max_steps=1"), **QUIET)


def test_cli_fine_tune_error_is_one_line_exit_2(tmp_path, base):
    import subprocess

    train_tsv, valid_tsv = domain(tmp_path)
    config = tmp_path / "finetune.yaml"
    config.write_text(
        f"data: {{corpus: tsv, train_files: [{train_tsv}], valid_files: [{valid_tsv}]}}\n"
        f"train: {{init_from: {base}}}\n"
        "model: {d_model: 64}\n",
        encoding="utf-8",
    )
    cmd = [
        sys.executable,
        "-m",
        "attnkit.cli",
        "train",
        "--config",
        str(config),
        "--output-dir",
        str(tmp_path / "o"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "model.d_model" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_prepared_data_for_a_fine_tuning_uses_the_checkpoints_tokenizer(tmp_path, base):
    """`attnkit prepare` with train.init_from encodes with the checkpoint's tokenizer, and a
    fine-tuning trains from those arrays; data prepared with another tokenizer is refused."""
    from attnkit.data.prepare import prepare

    cfg = tuned(tmp_path, base, "train.max_steps=2", "valid.every=2")
    prepare(cfg, tmp_path / "prep", workers=1, log=lambda m: None)
    prepared_cfg = tuned(
        tmp_path, base, "train.max_steps=2", "valid.every=2", f"data.prepared={tmp_path / 'prep'}"
    )
    state = load_checkpoint(train(prepared_cfg, **QUIET).last_checkpoint)
    assert state["tokenizer"] == load_checkpoint(base)["tokenizer"] and state["step"] == 2
    other = load_config(None, [*cfg_overrides(cfg), "train.init_from=", "tokenizer.vocab_size=60"])
    prepare(other, tmp_path / "other", workers=1, log=lambda m: None)
    wrong = tuned(
        tmp_path,
        base,
        "train.max_steps=2",
        f"data.prepared={tmp_path / 'other'}",
        f"output_dir={tmp_path / 'w'}",
    )
    with pytest.raises((CheckpointError, ConfigError), match="prepare|prepared with"):
        train(wrong, **QUIET)


def cfg_overrides(cfg) -> list[str]:
    """The data keys of ``cfg`` as overrides (to prepare the same corpus another way)."""
    d = cfg.data
    return [
        f"data.corpus={d.corpus}",
        f"data.train_files=[{d.train_files[0]}]",
        f"data.valid_files=[{d.valid_files[0]}]",
    ]
