"""The training loop: it runs what :mod:`.build` built and asks the task for everything task-specific.

Per optimizer step: ``accumulate`` token-budget batches per process, the loss summed over target
tokens and divided by the global token count, so K processes (or K accumulated batches) give the
gradient of one batch K times as large. Rank 0 validates, logs and writes checkpoints. The CPU
speed-ups of :mod:`attnkit.fast` (fused loss, cheaper dropout masks) are applied here, at the edge.

SIGTERM or SIGINT (a scheduler's pre-emption, Ctrl-C) stops the run at the end of the step in
progress, on every rank at the same step: ``checkpoint_last.pt`` is written there (a full, exactly
resumable checkpoint, not validated) and :class:`~attnkit.errors.Stopped` carries the exit code and
the command that resumes it. A second signal acts at once.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import torch
import yaml
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .. import fast
from ..checkpoint import save_checkpoint, unwrap
from ..denormals import denormals_flushed
from ..errors import ConfigError, Stopped
from ..files import atomic_write
from ..linear_loss import chunked_loss
from ..loss import LossOutput
from ..model import count_parameters
from ..plugin.training import check_reported
from ..precision import amp_dtype, autocast, grad_scaler
from . import distributed as ddp
from .build import Setup, build
from .checkpoint_files import CheckpointFiles
from .config import ExperimentConfig
from .ema import average_parameters, weight_average
from .metrics_csv import Window
from .progress import Progress
from .result import TrainResult
from .rng_state import rng_state
from .run_folder import RESOLVED_CONFIG, RunFolder
from .schedule import lr_at
from .signals import StopSignals, agreed_signal
from .tensorboard_log import require_tensorboard
from .trainer_state import checkpoint_state, restore, stopped_line
from .update import Update


class Trainer:
    """Runs a built :class:`Setup`; ``Trainer.from_config`` builds and runs in one go."""

    def __init__(self, setup: Setup, *, log=print, folder: RunFolder | None = None):
        self.s, self.cfg, self.log, self.folder = setup, setup.cfg, log, folder
        self.model, self.task, self.dist = setup.model, setup.task, setup.dist
        self.out = Path(self.cfg.output_dir)
        self.files = CheckpointFiles(self.out, self.cfg.valid.keep_last, self.cfg.valid.average_last)
        self.metric = self.task.metric
        self.step, self.bad_validations, self.elapsed_before = 0, 0, 0.0
        self.pending_validation = False  # a signal stopped the run at a validation step, before it
        self.best_score = float("-inf") if self.task.higher_is_better else float("inf")
        self.scaler = grad_scaler(setup.precision, setup.device)  # fp16 only
        self.ema = weight_average(self.model, self.cfg.train.ema_decay, setup.resume_state)
        self.update = Update(setup.optimizer, self.scaler, self.ema, self.cfg.train.clip_norm)
        self.progress = Progress(
            self.cfg.train,
            main=self.dist.is_main,
            world_size=self.dist.world_size,
            metrics=self.task.metrics,
            log=log,
        )
        if self.cfg.train.tensorboard:
            require_tensorboard()  # before the run moves anything in its output folder
        chunk = self.cfg.train.output_loss_chunk
        self.loss_fn: Callable[..., LossOutput] = (
            chunked_loss(self.model, chunk) if chunk else fast.label_smoothed_cross_entropy
        )
        self.grad_norm: float | None = None
        if setup.resume_state is not None:
            restore(self, setup.resume_state)
        self.train_model: nn.Module = self.model
        self.task_loss: Callable[..., LossOutput] = self.task.loss
        if self.cfg.train.compile:
            # the model's forward and the loss as one graph (the backward follows it), one graph
            # for every batch shape: dynamic=True, so a new length never recompiles
            self.task_loss = torch.compile(self.task.loss, dynamic=True)
        if self.dist.enabled:
            ids = [setup.device.index] if setup.device.type == "cuda" else None
            self.train_model = DistributedDataParallel(self.train_model, device_ids=ids)
        for note in setup.notes:
            self.info(note)
        tok = setup.tokenizer
        self.info(
            f"{self.cfg.arch}: {count_parameters(self.model):,} parameters; "
            f"{len(setup.train.examples):,} training "
            f"examples; vocabulary {tok.src_vocab_size}/{tok.tgt_vocab_size}; device {setup.device}"
            f"{' x' + str(self.dist.world_size) + ' processes' if self.dist.enabled else ''}; "
            f"{setup.precision}"
        )

    @classmethod
    def from_config(cls, cfg: ExperimentConfig, *, resume: str | Path | None = None, log=print) -> Trainer:
        return cls(build(cfg, resume=resume), log=log)

    # -- bookkeeping -------------------------------------------------------------------------
    @property
    def sampler(self):
        return self.s.sampler

    @property
    def epoch(self) -> int:
        """The data position lives in the sampler; the epoch is read from it, never kept twice."""
        return self.s.sampler.epoch

    def info(self, message: str) -> None:
        if self.dist.is_main:
            self.log(message)

    def lr(self, step: int) -> float:
        t = self.cfg.train
        keys = ("schedule", "lr", "lr_scale", "warmup_steps", "max_steps", "cooldown_steps")
        return lr_at(step, d_model=self.s.d_model, **{k: getattr(t, k) for k in keys})

    def better(self, score: float) -> bool:
        return score > self.best_score if self.task.higher_is_better else score < self.best_score

    def elapsed(self) -> float:
        return self.elapsed_before + (time.monotonic() - self.t0)

    # -- one optimizer step --------------------------------------------------------------------
    def _next_batches(self, it: Iterator[list[int]]) -> tuple[list[list[int]], Iterator[list[int]], bool]:
        batches: list[list[int]] = []
        while len(batches) < self.cfg.train.accumulate:
            try:
                batches.append(next(it))
            except StopIteration:
                it = iter(self.s.sampler)  # the sampler has moved on to the next epoch itself
                if self.cfg.train.max_epochs and self.epoch >= self.cfg.train.max_epochs:
                    return batches, it, True
        return batches, it, False

    def train_step(self, index_batches: list[list[int]]) -> tuple[float, float, int]:
        """Forward, backward and update on this process's batches -> (loss sum, nll sum, tokens)."""
        s = self.s
        examples = s.task.epoch_examples(s.train, s.tokenizer, self.epoch)
        batches = [s.task.collate([examples[i] for i in b], s.tokenizer).to(s.device) for b in index_batches]
        local_tokens = sum(b.n_tgt_tokens for b in batches)
        global_tokens = ddp.all_reduce_sum(float(local_tokens), self.dist, s.device)
        # DDP averages gradients over processes; scaling by world_size makes that a sum.
        scale = self.dist.world_size / global_tokens
        sums: list[torch.Tensor] = []  # (2,) loss and nll of each batch, read once after the last
        self.train_model.train()
        for i, batch in enumerate(batches):
            sync = i == len(batches) - 1 or not self.dist.enabled
            ctx: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
            if not sync:
                assert isinstance(self.train_model, DistributedDataParallel)  # wrapped when distributed
                ctx = self.train_model.no_sync()
            with ctx, autocast(s.device, amp_dtype(s.precision)):
                out = self.task_loss(
                    self.train_model,
                    batch,
                    s.tokenizer,
                    epsilon=self.cfg.train.label_smoothing,
                    loss_fn=self.loss_fn,
                )
                self.update.backward(out.loss * scale)
            sums.append(torch.stack([out.loss.detach(), out.nll.detach()]))
        values = torch.stack(sums).tolist()  # (batches, 2): the step's one wait for the device
        loss_sum, nll_sum = sum(v[0] for v in values), sum(v[1] for v in values)
        self.step += 1
        for group in s.optimizer.param_groups:
            group["lr"] = self.lr(self.step)
        if ddp.all_reduce_sum(float(not math.isfinite(loss_sum)), self.dist, s.device):  # every rank stops
            self._diverged(f"the training loss is not finite ({loss_sum}) at step {self.step}")
        self.grad_norm = self.update.apply(self.model, measure=self.progress.board is not None)
        return loss_sum, nll_sum, local_tokens

    def _diverged(self, what: str) -> None:
        last = self.out / "checkpoint_last.pt"
        t = self.cfg.train
        rate = f"train.lr_scale = {t.lr_scale}" if t.schedule == "noam" else f"train.lr = {t.lr}"
        raise ConfigError(
            f"training diverged: {what} ({rate}); lower {rate.split(' =')[0]} or raise "
            f"train.warmup_steps. Nothing non-finite was saved; last checkpoint: "
            f"{last if last.exists() else 'none'}"
        )

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        cfg, t = self.cfg, self.cfg.train
        if self.step >= t.max_steps:  # resumed at its last step: say so rather than train nothing silently
            self.info(f"nothing to train: the checkpoint is at step {self.step} = train.max_steps; raise it")
        self.t0 = time.monotonic()
        self._open_run_folder()
        self.progress.start(self.out, self.step)
        it, stop_reason = iter(self.s.sampler), "max_steps"
        if self.pending_validation and self._validate_and_save():  # what the stopped run skipped
            stop_reason = "early stopping"
        signum = None
        cpu = self.s.device.type == "cpu"  # tiny values late in training slow CPU math: flushed in the loop
        with StopSignals() as stop, fast.fast_dropout(self.model), denormals_flushed(cpu):
            while self.step < t.max_steps and stop_reason != "early stopping":
                batches, it, epochs_done = self._next_batches(it)
                if epochs_done and not batches:
                    stop_reason = "max_epochs"
                    break
                loss = self.train_step(batches)  # first: it counts the step
                self.progress.step(self.step, loss, self._log_row)
                out_of_time = self._out_of_time()
                ending = self.step == t.max_steps or out_of_time or epochs_done
                signum = (
                    None if ending else agreed_signal(stop, self.dist, self.s.device)
                )  # the end validates as usual
                if signum:
                    self.pending_validation = self.step % cfg.valid.every == 0
                    break
                if self.step % cfg.valid.every == 0 or ending:
                    if self._validate_and_save():
                        stop_reason = "early stopping"
                        break
                if out_of_time or epochs_done:
                    stop_reason = "max_minutes" if out_of_time else "max_epochs"
                    break
        self.progress.close()
        if signum:
            self._save_and_stop(signum)
        last = self.out / "checkpoint_last.pt"
        if self.step % cfg.valid.every and stop_reason == "max_epochs" and not last.exists():
            self._validate_and_save()
        self.info(
            f"stopped at step {self.step} ({stop_reason}); best valid {self.metric} {self.best_score:.2f}"
        )
        return self._finish(last)

    def _log_row(self, w: Window) -> dict:
        """A log line's fields over the window ``w`` (the CSV's, and the gradient norm for TensorBoard)."""
        return {
            "step": self.step,
            "epoch": self.epoch,
            "elapsed_s": round(self.elapsed(), 1),
            "lr": f"{self.lr(self.step):.3e}",
            "train_loss": round(w.loss / max(w.tokens, 1), 4),
            "train_nll": round(w.nll / max(w.tokens, 1), 4),
            **self.progress.window_row(w),
            "grad_norm": self.grad_norm,
        }

    def _out_of_time(self) -> bool:
        """train.max_minutes has passed, as rank 0 sees it: every rank stops together."""
        t = self.cfg.train
        out_of_time = bool(t.max_minutes and self.elapsed() >= 60 * t.max_minutes)
        if t.max_minutes and self.dist.enabled:
            out_of_time = bool(ddp.broadcast_object(out_of_time, self.dist))
        return out_of_time

    def _open_run_folder(self) -> None:
        """Rank 0: the run's folder, its resolved config and TensorBoard log, once every check has passed."""
        if self.dist.is_main:
            if self.folder is not None:  # every check has passed: an old run's files may move aside now
                self.folder.start_writing(self.step)
            self.out.mkdir(parents=True, exist_ok=True)
            with atomic_write(self.out / RESOLVED_CONFIG) as f:
                f.write(yaml.safe_dump(self.cfg.to_dict(), sort_keys=False))

    def _finish(self, last: Path) -> TrainResult:
        """The averaged checkpoint and the learning curve (rank 0), then what the run left."""
        averaged = curve = None
        if self.dist.is_main:
            averaged = self.files.average()
            if averaged is not None:
                n = min(self.cfg.valid.average_last, len(self.files.steps()))
                self.info(f"averaged the last {n} checkpoints into {averaged}")
            if self.progress.csv_path.exists():
                from ..plotting import plot_learning_curve

                curve = plot_learning_curve(
                    self.progress.csv_path, self.out / "learning_curve.png", metric=self.metric
                )
        ddp.barrier(self.dist)
        best = self.out / "checkpoint_best.pt"
        return TrainResult(
            self.out,
            self.step,
            self.metric,
            self.best_score,
            best if best.exists() else None,
            last if last.exists() else None,
            averaged,
            self.progress.csv_path,
            curve,
        )

    def _save_and_stop(self, signum: int) -> NoReturn:
        """Write checkpoint_last.pt at this step, as a periodic save would but unvalidated, and stop."""
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):  # the same on every rank
            self._diverged(f"the weights are not finite after step {self.step}")
        rngs = ddp.gather_object(rng_state(), self.dist)  # a collective: every rank is here
        last = self.out / "checkpoint_last.pt"
        message = ""
        if self.dist.is_main:
            state = checkpoint_state(self, rngs)
            state["metrics"]["pending_validation"] = self.pending_validation
            save_checkpoint(state, last)
            if self.folder is not None:
                self.folder.first_checkpoint_written()
            message = stopped_line(self, signum, last)
        ddp.barrier(self.dist)  # the checkpoint is on disk before any rank ends
        raise Stopped(message, exit_code=128 + signum)

    def _validate_and_save(self) -> bool:
        """Validate (rank 0), write checkpoints, and say whether to stop early (all ranks agree)."""
        stop = False
        rngs = ddp.gather_object(rng_state(), self.dist)  # before validation, which draws nothing
        if self.dist.is_main:
            s = self.s
            model = average_parameters(self.ema, unwrap(self.model)).eval()  # the average, if kept
            metrics = s.task.validate(model, s.tokenizer, s.valid, s.valid_records, s.device)
            check_reported(s.task, self.cfg.task or self.cfg.arch, metrics)
            board = self.progress.board
            if board:
                board.scalars("valid", self.step, metrics)
                board.picture(self.step, self.task, model, s.tokenizer, s.valid_records, s.device)
            score = metrics[self.metric]
            improved = self.better(score)
            if improved:
                self.best_score = score
            self.bad_validations = 0 if improved else self.bad_validations + 1
            shown = ", ".join(f"{k} {v:.3f}" if k == "loss" else f"{k} {v:.2f}" for k, v in metrics.items())
            self.log(f"validation at step {self.step}: {shown}{' (best)' if improved else ''}")
            self.progress.write(
                {"step": self.step, "epoch": self.epoch, "elapsed_s": round(self.elapsed(), 1)}
                | {f"val_{k}": round(v, 4) for k, v in metrics.items()}
            )
            if not math.isfinite(metrics.get("loss", 0.0)):
                self._diverged(f"the validation loss is not finite ({metrics['loss']}) at step {self.step}")
            if not all(torch.isfinite(p).all() for p in self.model.parameters()):
                self._diverged(f"the weights are not finite after step {self.step}")
            state = checkpoint_state(self, rngs)
            self.files.save(state, self.step, improved=improved)
            if self.folder is not None:
                self.folder.first_checkpoint_written()
            patience = self.cfg.valid.patience
            stop = bool(patience and self.bad_validations >= patience)
        return bool(ddp.broadcast_object(stop, self.dist))
