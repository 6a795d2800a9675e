"""Training end to end at tiny scale: loss falls, exact resume, 2-process DDP, checkpoints, schedule."""

import csv
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import average_checkpoints, load_checkpoint, save_checkpoint
from attnkit.errors import CheckpointError, ConfigError
from attnkit.train import Trainer, load_config, train
from attnkit.train.schedule import lr_at

TINY = [
    "data.max_train_pairs=300",
    "data.max_valid_pairs=30",
    "tokenizer.vocab_size=300",
    "model.preset=tiny",
    "model.share_vocab=true",
    "train.max_tokens=800",
    "train.schedule=inverse_sqrt",
    "train.lr=0.003",
    "train.warmup_steps=5",
    "train.progress=false",
    "train.log_every=5",
    "valid.keep_last=2",
]


@pytest.fixture
def tiny_config(shared_data):
    """tiny_config(output_dir, *overrides): the tiny experiment on the shared Multi30k."""

    def make(tmp: Path, *extra: str):
        return load_config(None, [f"data.data_dir={shared_data}", *TINY, f"output_dir={tmp}", *extra])

    return make


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_training_lowers_validation_loss_and_writes_its_outputs(tmp_path, tiny_config):
    result = train(
        tiny_config(tmp_path, "train.max_steps=30", "valid.every=10", "valid.average_last=2"),
        log=lambda m: None,
    )
    val = [float(r["val_loss"]) for r in read_csv(result.metrics_csv) if r["val_loss"]]
    assert len(val) == 3 and val[-1] < val[0] - 0.3
    for name in (
        "checkpoint_best.pt",
        "checkpoint_last.pt",
        "checkpoint_averaged.pt",
        "resolved_config.yaml",
        "learning_curve.png",
    ):
        assert (tmp_path / name).exists(), name
    assert sorted(p.name for p in tmp_path.glob("checkpoint_step*.pt")) == [
        "checkpoint_step20.pt",
        "checkpoint_step30.pt",
    ]
    state = load_checkpoint(result.last_checkpoint)
    assert state["step"] == 30 and state["arch"] == "transformer" and "optimizer" in state


def straight_and_resumed(tiny_config, tmp_path, common) -> tuple[dict, dict]:
    """The last checkpoints of 8 steps straight and of 4 steps, stop, resume, 4 more (same overrides)."""
    straight = train(tiny_config(tmp_path / "a", *common, "train.max_steps=8"), log=lambda m: None)
    half = train(tiny_config(tmp_path / "b", *common, "train.max_steps=4"), log=lambda m: None)
    resumed = train(
        tiny_config(tmp_path / "b", *common, "train.max_steps=8"),
        resume=half.last_checkpoint,
        log=lambda m: None,
    )
    a, b = load_checkpoint(straight.last_checkpoint), load_checkpoint(resumed.last_checkpoint)
    assert a["step"] == b["step"] == 8 and a["sampler"] == b["sampler"]
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    return a, b


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
@pytest.mark.slow
def test_resume_continues_exactly(tmp_path, arch, tiny_config):
    """N steps straight == N/2 steps, stop, resume, N/2 steps: identical weights (dropout on)."""
    model = ["model.preset=tiny", "model.dropout=0.1"] + (
        ["model.arch=rnn", "model.share_vocab=false"] if arch == "rnn" else []
    )
    straight_and_resumed(tiny_config, tmp_path, [*model, "valid.every=4"])


@pytest.mark.slow
def test_resume_continues_exactly_in_bf16_on_a_cpu(tmp_path, tiny_config):
    """train.precision=bf16 on a CPU (autocast): the weights stay float32 and resume is exact."""
    a, _ = straight_and_resumed(
        tiny_config, tmp_path, ["model.dropout=0.1", "valid.every=4", "train.precision=bf16"]
    )
    assert {t.dtype for t in a["model"].values() if t.is_floating_point()} == {torch.float32}


@pytest.mark.slow
def test_bf16_on_a_cpu_without_native_bf16_says_it_will_be_slow(tmp_path, tiny_config, monkeypatch):
    build_module = sys.modules["attnkit.train.build"]  # the module (attnkit.train.build is also a function)
    monkeypatch.setattr(build_module, "_cpu_has_bf16", lambda: False)
    lines: list[str] = []
    train(
        tiny_config(tmp_path, "train.max_steps=1", "valid.every=1", "train.precision=bf16"), log=lines.append
    )
    assert any("emulated" in line and "train.precision=fp32" in line for line in lines), lines
    monkeypatch.setattr(build_module, "_cpu_has_bf16", lambda: True)
    for glibc, name in ((True, "b"), (False, "c")):  # native bf16: the allocator note only under glibc
        monkeypatch.setattr(build_module, "_uses_glibc_malloc", lambda glibc=glibc: glibc)
        lines.clear()
        train(
            tiny_config(tmp_path / name, "train.max_steps=1", "valid.every=1", "train.precision=bf16"),
            log=lines.append,
        )
        assert not any("emulated" in line for line in lines) and any("bf16" in line for line in lines)
        assert any("LD_PRELOAD=libjemalloc" in line for line in lines) == glibc, lines


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_glibc_malloc_is_told_from_a_preloaded_allocator():
    from attnkit.train.build import _uses_glibc_malloc

    preloaded = any(name in os.environ.get("LD_PRELOAD", "") for name in ("jemalloc", "tcmalloc"))
    assert _uses_glibc_malloc() is not preloaded


def test_bf16_autocast_on_a_cpu_gives_the_fp32_loss_and_gradient_to_bf16_precision():
    from attnkit import fast
    from helpers import make_model, random_tokens

    model = make_model("transformer")  # eval mode: no dropout, so both passes see the same function
    src, tgt = random_tokens(8, 12), random_tokens(8, 11)  # the tiny preset: 20 tokens a side

    def loss_and_grad(bf16: bool):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt[:, :-1])  # (B, T, V)
            out = fast.label_smoothed_cross_entropy(logits, tgt[:, 1:], epsilon=0.1, pad_id=0)
        out.loss.backward()
        return out.loss.item(), torch.cat(
            [p.grad.flatten() for p in model.parameters() if p.grad is not None]
        )

    (loss32, grad32), (loss16, grad16) = loss_and_grad(False), loss_and_grad(True)
    assert loss16 == pytest.approx(loss32, rel=1e-2) and loss16 != loss32  # bf16 really ran
    assert torch.nn.functional.cosine_similarity(grad16, grad32, dim=0) > 0.99


def test_fresh_run_into_an_existing_run_is_refused(tmp_path, tiny_config):
    train(tiny_config(tmp_path, "train.max_steps=2", "valid.every=2"), log=lambda m: None)
    with pytest.raises(ConfigError, match="--resume"):
        train(tiny_config(tmp_path, "train.max_steps=2"), log=lambda m: None)


def test_resume_with_another_architecture_is_a_clear_error(tmp_path, tiny_config):
    run = train(tiny_config(tmp_path / "t", "train.max_steps=2", "valid.every=2"), log=lambda m: None)
    cfg = tiny_config(tmp_path / "r", "model.arch=rnn", "model.share_vocab=false", "train.max_steps=4")
    with pytest.raises(CheckpointError, match="different model"):
        train(cfg, resume=run.last_checkpoint, log=lambda m: None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_ddp_matches_one_process_on_the_same_global_batch(tmp_path, tiny_config, shared_data):
    """torchrun with 2 gloo processes == 1 process accumulating the same 2 batches per step.

    Four steps stay inside the first epoch, where both see batches 0..7 in the same order.
    """
    overrides = [
        f"data.data_dir={shared_data}",
        *TINY,
        "train.max_steps=4",
        "valid.every=4",
        "model.dropout=0.0",
    ]
    config = tmp_path / "tiny.yaml"
    config.write_text("model:\n  arch: transformer\n")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "-m",
        "attnkit.cli",
        "train",
        "--config",
        str(config),
        *overrides,
        f"output_dir={tmp_path / 'ddp'}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "x2 processes" in proc.stderr
    single = train(
        tiny_config(
            tmp_path / "one", "train.max_steps=4", "valid.every=4", "model.dropout=0.0", "train.accumulate=2"
        ),
        log=lambda m: None,
    )
    a, b = load_checkpoint(tmp_path / "ddp" / "checkpoint_last.pt"), load_checkpoint(single.last_checkpoint)
    for name, tensor in a["model"].items():
        other = b["model"][name]
        if name.endswith("kv_proj.bias"):
            # The key bias b_K adds q.b_K to every score of a query: softmax ignores it, its gradient is
            # rounding noise, and Adam scales noise up to full-size steps. Compare b_V of [b_K; b_V].
            D = tensor.numel() // 2
            tensor, other = tensor[D:], other[D:]
        torch.testing.assert_close(tensor, other, atol=1e-5, rtol=1e-4, msg=name)
    start = load_checkpoint(tmp_path / "one" / "checkpoint_step4.pt")["model"]
    assert a["step"] == b["step"] == 4 and set(start) == set(a["model"])


def test_noam_schedule_is_the_papers_formula():
    d, warmup = 512, 4000
    for step in (1, 100, 4000, 10000):
        expected = d**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert lr_at(
            step, schedule="noam", lr=0, lr_scale=1.0, warmup_steps=warmup, d_model=d
        ) == pytest.approx(expected)
    peak = lr_at(4000, schedule="noam", lr=0, lr_scale=1.0, warmup_steps=4000, d_model=512)
    assert peak == pytest.approx(7e-4, rel=0.01)
    assert lr_at(
        100, schedule="inverse_sqrt", lr=1e-3, lr_scale=1, warmup_steps=100, d_model=1
    ) == pytest.approx(1e-3)
    assert lr_at(
        400, schedule="inverse_sqrt", lr=1e-3, lr_scale=1, warmup_steps=100, d_model=1
    ) == pytest.approx(5e-4)


def test_cooldown_scales_the_last_steps_linearly_towards_zero():
    def at(step, cooldown):
        kwargs = dict(
            schedule="inverse_sqrt", lr=1e-3, lr_scale=1, warmup_steps=100, d_model=1, max_steps=1000
        )
        return lr_at(step, cooldown_steps=cooldown, **kwargs)

    # Untouched before the cooldown starts (and everywhere without one).
    for step in (1, 50, 100, 400, 800):
        assert (
            at(step, 200)
            == at(step, 0)
            == lr_at(step, schedule="inverse_sqrt", lr=1e-3, lr_scale=1, warmup_steps=100, d_model=1)
        )
    # Then the 1/sqrt(step) value times (steps left + 1) / cooldown: halfway is half, the last step 1/200.
    assert at(801, 200) == pytest.approx(at(801, 0))
    assert at(901, 200) == pytest.approx(at(901, 0) * 100 / 200)
    assert at(1000, 200) == pytest.approx(at(1000, 0) / 200)
    values = [at(step, 200) for step in range(800, 1001)]
    assert all(b < a for a, b in zip(values, values[1:]))  # strictly falling through the cooldown
    with pytest.raises(ValueError, match="needs max_steps"):
        lr_at(5, schedule="constant", lr=1e-3, lr_scale=1, warmup_steps=1, d_model=1, cooldown_steps=2)


def test_the_trainer_follows_the_cooldown(tmp_path, tiny_config):
    """The trainer's lr is the schedule's with the run's max_steps and cooldown_steps passed through."""
    config = tiny_config(tmp_path / "run", "train.max_steps=20", "train.cooldown_steps=8")
    trainer = Trainer.from_config(config, log=lambda m: None)
    t = config.train
    schedule = dict(schedule=t.schedule, lr=t.lr, lr_scale=t.lr_scale, warmup_steps=t.warmup_steps)
    schedule["d_model"] = trainer.s.d_model
    for step in (1, 12, 13, 16, 20):
        assert trainer.lr(step) == pytest.approx(lr_at(step, max_steps=20, cooldown_steps=8, **schedule))
    assert trainer.lr(20) == pytest.approx(lr_at(20, **schedule) / 8)
    assert trainer.lr(12) == lr_at(12, **schedule)  # before the cooldown: untouched


def test_checkpoints_are_written_atomically_and_corruption_is_detected(tmp_path, monkeypatch):
    state = {"arch": "transformer", "model_config": {}, "model": {"w": torch.ones(2)}, "tokenizer": {}}
    path = save_checkpoint(state, tmp_path / "c.pt")
    assert load_checkpoint(path)["model"]["w"].sum() == 2

    # A crash during the write leaves the old file intact and no temporary file behind.
    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({**state, "model": {"w": torch.zeros(2)}}, path)
    monkeypatch.undo()
    assert load_checkpoint(path)["model"]["w"].sum() == 2
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]
    # Truncated, foreign and missing files give CheckpointError, not a traceback from torch.
    data = path.read_bytes()
    (tmp_path / "trunc.pt").write_bytes(data[: len(data) // 2])
    torch.save({"a": 1}, tmp_path / "foreign.pt")
    for bad, match in (
        ("trunc.pt", "not a readable"),
        ("foreign.pt", "not an attnkit"),
        ("none.pt", "not found"),
    ):
        with pytest.raises(CheckpointError, match=match):
            load_checkpoint(tmp_path / bad)


def test_averaging_gives_the_mean_of_the_weights(tmp_path):
    base = {"arch": "transformer", "model_config": {"x": 1}, "tokenizer": {}}
    paths = [
        save_checkpoint({**base, "model": {"w": torch.full((2,), float(i))}}, tmp_path / f"{i}.pt")
        for i in range(3)
    ]
    avg = average_checkpoints(paths)
    assert torch.equal(avg["model"]["w"], torch.full((2,), 1.0))
    other = save_checkpoint(
        {**base, "model_config": {"x": 2}, "model": {"w": torch.zeros(2)}}, tmp_path / "o.pt"
    )
    with pytest.raises(CheckpointError, match="different model"):
        average_checkpoints([paths[0], other])


def test_trains_from_a_hugging_face_dataset_and_from_plain_files(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [{"de": f"ein hund {i} läuft", "en": f"a dog {i} runs"} for i in range(40)]
    ds = datasets.DatasetDict(
        {split: datasets.Dataset.from_dict({"translation": rows}) for split in ("train", "validation")}
    )
    ds.save_to_disk(str(tmp_path / "hf"))
    (tmp_path / "s.de").write_text("".join(r["de"] + "\n" for r in rows))
    (tmp_path / "t.en").write_text("".join(r["en"] + "\n" for r in rows))
    files = f"{tmp_path / 's.de'},{tmp_path / 't.en'}"
    common = [
        "tokenizer.vocab_size=40",
        "model.preset=tiny",
        "model.share_vocab=true",
        "train.max_steps=2",
        "valid.every=2",
        "train.progress=false",
    ]
    for name, data in (
        (
            "hf",
            [
                "data.corpus=hf",
                f"data.dataset={tmp_path / 'hf'}",
                "data.train_split=train",
                "data.valid_split=validation",
            ],
        ),
        ("files", ["data.corpus=files", f"data.train_files=[{files}]", f"data.valid_files=[{files}]"]),
    ):
        result = train(
            load_config(None, [*common, *data, f"output_dir={tmp_path / name}"]), log=lambda m: None
        )
        assert result.step == 2 and result.last_checkpoint.exists()


@pytest.mark.slow
def test_resume_from_the_end_of_an_epoch_starts_the_next_one(tmp_path, tiny_config):
    small = ["data.max_train_pairs=100", "model.dropout=0.1"]
    n = len(
        Trainer.from_config(tiny_config(tmp_path / "probe", *small), log=lambda m: None).sampler
    )  # batches per epoch
    straight = train(
        tiny_config(tmp_path / "a", *small, f"train.max_steps={n + 2}", f"valid.every={n}"),
        log=lambda m: None,
    )
    half = train(
        tiny_config(tmp_path / "b", *small, f"train.max_steps={n}", f"valid.every={n}"), log=lambda m: None
    )
    assert load_checkpoint(half.last_checkpoint)["sampler"] == {"epoch": 1, "position": 0}
    cfg = tiny_config(tmp_path / "b", *small, f"train.max_steps={n + 2}", f"valid.every={n}")
    resumed = train(cfg, resume=half.last_checkpoint, log=lambda m: None)
    a, b = load_checkpoint(straight.last_checkpoint), load_checkpoint(resumed.last_checkpoint)
    assert a["sampler"] == b["sampler"] == {"epoch": 1, "position": 2}
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


def test_early_stopping_after_patience_validations_without_better_bleu(tmp_path, tiny_config):
    # A learning rate of ~0 keeps the model (and its BLEU) fixed: the second validation is no better.
    cfg = tiny_config(
        tmp_path,
        "train.schedule=constant",
        "train.lr=1e-12",
        "train.max_steps=50",
        "valid.every=2",
        "valid.patience=1",
    )
    logs = []
    result = train(cfg, log=logs.append)
    assert result.step == 4
    assert any("early stopping" in m for m in logs)


def test_each_log_line_gives_the_rate_and_the_time_left(tmp_path, monkeypatch):
    """Without a bar (a log, a pipe), each line says steps per second over its window and what the
    steps left would take at that rate; the last says no time left."""
    import types

    from attnkit.report import duration as _duration
    from attnkit.train import progress as progress_module
    from attnkit.train.progress import Progress

    clock = iter(float(i) for i in range(1000))  # one second per call of the clock
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    t = types.SimpleNamespace(progress=True, log_every=2, max_steps=6, tensorboard=False)
    lines: list[str] = []
    p = Progress(t, main=True, world_size=1, metrics=("loss",), log=lines.append)
    p.start(tmp_path, 0)
    for step in range(1, 7):
        row = {"step": step, "epoch": 1, "elapsed_s": step, "lr": 0.1, "train_loss": 1.0, "train_nll": 1.0}
        p.step(step, (1.0, 1.0, 10), lambda w, row=row: {**row, "tokens_per_s": 10, "grad_norm": 1.0})
    p.close()
    logged = [line for line in lines if line.startswith("step 2/6") or line.startswith("step 6/6")]
    assert len(logged) == 2
    rate = float(logged[0].split(", ")[1].split()[0])
    assert rate > 0 and logged[0].endswith(f"about {_duration(4 / rate)} left"), logged[0]
    assert "step/s" in logged[1] and "left" not in logged[1]
