"""The training loop: one trainer for every seq2seq model (it knows only the shared interface).

Per optimizer step: ``accumulate`` token-budget batches per process, the loss summed over target
tokens and divided by the global token count, so K processes (or K accumulated batches) give the
gradient of one batch K times as large. Rank 0 validates, logs and writes checkpoints.
"""

from __future__ import annotations

import contextlib
import csv
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from torch.nn.parallel import DistributedDataParallel

from ..checkpoint import (
    average_checkpoints,
    build_model,
    load_checkpoint,
    model_from_checkpoint,
    save_checkpoint,
    unwrap,
)
from ..data.batching import TokenBatchSampler, collate
from ..data.tokenizer import SubwordTokenizer
from ..errors import CheckpointError, ConfigError
from ..loss import label_smoothed_cross_entropy
from ..metrics import corpus_scores
from ..model import count_parameters
from ..translate import Translator, resolve_device
from . import distributed as ddp
from .config import ExperimentConfig
from .data import encode_training_pairs, load_pairs, train_tokenizer
from .schedule import lr_at

CSV_FIELDS = [
    "step",
    "epoch",
    "elapsed_s",
    "lr",
    "train_loss",
    "train_nll",
    "tokens_per_s",
    "val_loss",
    "val_bleu",
]


@dataclass
class TrainResult:
    output_dir: Path
    step: int
    best_bleu: float
    best_checkpoint: Path | None
    last_checkpoint: Path | None
    averaged_checkpoint: Path | None
    metrics_csv: Path
    curve_png: Path | None


class Trainer:
    """Builds everything from an :class:`ExperimentConfig` and runs it; ``resume`` continues a run."""

    def __init__(
        self, cfg: ExperimentConfig, *, resume: str | Path | None = None, overwrite: bool = False, log=print
    ):
        self.cfg, self.log = cfg, log
        self.out = Path(cfg.output_dir)
        if resume is None and (self.out / "checkpoint_last.pt").exists():
            if not overwrite:
                raise ConfigError(
                    f"{self.out} already holds a training run: resume it with --resume "
                    f"{self.out / 'checkpoint_last.pt'}, choose another output_dir, or pass --overwrite"
                )
            for old in [*self.out.glob("checkpoint_*.pt"), self.out / "metrics.csv"]:
                old.unlink(missing_ok=True)
        self.device = resolve_device(cfg.train.device)
        if self.device.type == "cpu":
            torch.set_flush_denormal(True)  # tiny values late in training otherwise slow CPU math ~10x
        self.dist = ddp.init_distributed(self.device.type)
        if self.dist.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        self.bf16 = cfg.train.precision == "bf16" or (
            cfg.train.precision == "auto" and self.device.type == "cuda"
        )
        resume_state = load_checkpoint(resume) if resume else None
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)

        # Data and subwords: the tokenizer is trained once (rank 0) or comes from the checkpoint.
        train_pairs = load_pairs(cfg.data, "train")
        if cfg.data.max_train_pairs:
            train_pairs = train_pairs[: cfg.data.max_train_pairs]
        if resume_state is not None:
            self.tokenizer = SubwordTokenizer.from_state_dict(resume_state["tokenizer"])
        else:
            tok = train_tokenizer(train_pairs, cfg.tokenizer, cfg.train.seed) if self.dist.is_main else None
            state = ddp.broadcast_object(tok.state_dict() if tok else None, self.dist)
            self.tokenizer = tok or SubwordTokenizer.from_state_dict(state)
        model_cfg = cfg.model_config(self.tokenizer.src_vocab_size, self.tokenizer.tgt_vocab_size)
        self.max_len = min(cfg.data.max_len, model_cfg.max_len - 1)  # bos/eos take one position
        corpus = encode_training_pairs(train_pairs, self.tokenizer, self.max_len)
        self.examples = corpus.examples
        if corpus.n_empty or corpus.n_too_long:
            self.info(
                f"skipped {corpus.n_empty} training pair(s) with an empty side and {corpus.n_too_long} "
                f"longer than {self.max_len} subwords (data.max_len, model.max_len)"
            )
        self.valid_pairs = load_pairs(cfg.data, "valid")
        if cfg.data.max_valid_pairs:
            self.valid_pairs = self.valid_pairs[: cfg.data.max_valid_pairs]
        self.valid_examples: list | None = None

        lengths = [(len(s), len(t) + 1) for s, t in self.examples]
        self.sampler = TokenBatchSampler(
            lengths, cfg.train.max_tokens, shuffle=True, seed=cfg.train.seed,
            rank=self.dist.rank, world_size=self.dist.world_size,
        )  # fmt: skip
        if self.sampler.n_oversized:
            self.info(
                f"{self.sampler.n_oversized} training pair(s) exceed train.max_tokens; each is its own batch"
            )

        # Model, optimizer, state.
        if resume_state is not None:
            if resume_state["arch"] != cfg.arch or resume_state["model_config"] != model_cfg.to_dict():
                raise CheckpointError(
                    f"{resume}: checkpoint holds a different model ({resume_state['arch']}) than the config "
                    f"({cfg.arch}); resume with the config it was trained with"
                )
            self.model = model_from_checkpoint(resume_state)
        else:
            self.model = build_model(cfg.arch, model_cfg.to_dict())
        self.model.to(self.device)
        self.d_model = getattr(model_cfg, "d_model", getattr(model_cfg, "hidden_size", 512))
        t = cfg.train
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=self.lr(1),
            betas=(t.beta1, t.beta2),
            eps=t.eps,
            weight_decay=t.weight_decay,
            fused=True,  # one kernel over all parameters, on CPU and GPU alike
        )
        self.step, self.best_bleu, self.bad_validations = 0, -1.0, 0
        self.elapsed_before = 0.0
        if resume_state is not None:
            self._restore(resume_state)
        self.train_model = self.model
        if t.compile:
            self.train_model = torch.compile(self.train_model)
        if self.dist.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = DistributedDataParallel(self.train_model, device_ids=ids)
        self.info(
            f"{cfg.arch}: {count_parameters(self.model):,} parameters; {len(self.examples):,} training pairs; "
            f"vocabulary {self.tokenizer.src_vocab_size}/{self.tokenizer.tgt_vocab_size}; device {self.device}"
            f"{' x' + str(self.dist.world_size) + ' processes' if self.dist.enabled else ''}; "
            f"{'bf16' if self.bf16 else 'fp32'}"
        )

    # -- bookkeeping -------------------------------------------------------------------------
    def info(self, message: str) -> None:
        if self.dist.is_main:
            self.log(message)

    def lr(self, step: int) -> float:
        t = self.cfg.train
        return lr_at(
            step,
            schedule=t.schedule,
            lr=t.lr,
            lr_scale=t.lr_scale,
            warmup_steps=t.warmup_steps,
            d_model=self.d_model,
        )

    def _restore(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = state["step"]
        self.best_bleu = state["metrics"]["best_bleu"]
        self.bad_validations = state["metrics"]["bad_validations"]
        self.elapsed_before = state["metrics"]["elapsed_s"]
        self.sampler.load_state_dict(state["sampler"])
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        if torch.cuda.is_available() and rng.get("cuda") is not None:
            torch.cuda.set_rng_state_all(rng["cuda"])
        random.setstate((rng["python"][0], tuple(rng["python"][1]), rng["python"][2]))
        self.info(f"resumed from step {self.step} (epoch {self.epoch})")

    def _state(self) -> dict:
        py = random.getstate()
        return {
            "arch": self.cfg.arch,
            "model_config": unwrap(self.model).config.to_dict(),
            "tokenizer": self.tokenizer.state_dict(),
            "experiment": self.cfg.to_dict(),
            "model": unwrap(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "sampler": self.sampler.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "python": [py[0], list(py[1]), py[2]],
            },
            "metrics": {
                "best_bleu": self.best_bleu,
                "bad_validations": self.bad_validations,
                "elapsed_s": self.elapsed(),
            },
        }

    @property
    def epoch(self) -> int:
        """The data position lives in the sampler; the epoch is read from it, never kept twice."""
        return self.sampler.epoch

    def elapsed(self) -> float:
        return self.elapsed_before + (time.monotonic() - self.t0)

    # -- one optimizer step --------------------------------------------------------------------
    def _next_batches(self, it):
        batches = []
        while len(batches) < self.cfg.train.accumulate:
            try:
                batches.append(next(it))
            except StopIteration:
                it = iter(self.sampler)  # the sampler has moved on to the next epoch itself
                if self.cfg.train.max_epochs and self.epoch >= self.cfg.train.max_epochs:
                    return batches, it, True
        return batches, it, False

    def train_step(self, index_batches: list[list[int]]) -> tuple[float, float, int]:
        """Forward, backward and update on this process's batches -> (loss sum, nll sum, tokens)."""
        batches = [collate([self.examples[i] for i in b]).to(self.device) for b in index_batches]
        local_tokens = sum(b.n_tgt_tokens for b in batches)
        global_tokens = ddp.all_reduce_sum(float(local_tokens), self.dist, self.device)
        # DDP averages gradients over processes; scaling by world_size makes that a sum.
        scale = self.dist.world_size / global_tokens
        loss_sum = nll_sum = 0.0
        self.train_model.train()
        for i, batch in enumerate(batches):
            sync = i == len(batches) - 1 or not self.dist.enabled
            ctx = contextlib.nullcontext() if sync else self.train_model.no_sync()
            amp = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)
            with ctx, amp:
                logits = self.train_model(batch.src, batch.tgt_in)
                out = label_smoothed_cross_entropy(
                    logits,
                    batch.tgt_out,
                    epsilon=self.cfg.train.label_smoothing,
                    pad_id=self.tokenizer.pad_id,
                )
                (out.loss * scale).backward()
            loss_sum += out.loss.item()
            nll_sum += out.nll.item()
        self.step += 1
        lr = self.lr(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if self.cfg.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, nll_sum, local_tokens

    # -- validation ----------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> tuple[float, float]:
        """Validation loss (nll per target token) and cased sacreBLEU of the decoded valid split."""
        model = unwrap(self.model).eval()
        if self.valid_examples is None:  # encoded once: the tokenizer never changes during a run
            self.valid_examples = encode_training_pairs(
                self.valid_pairs, self.tokenizer, self.max_len
            ).examples
        examples = self.valid_examples
        nll, tokens = 0.0, 0
        sampler = TokenBatchSampler(
            [(len(s), len(t) + 1) for s, t in examples], self.cfg.valid.batch_tokens, shuffle=False
        )
        for idx in sampler:
            batch = collate([examples[i] for i in idx]).to(self.device)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                out = label_smoothed_cross_entropy(model(batch.src, batch.tgt_in), batch.tgt_out, epsilon=0.0)
            nll, tokens = nll + out.nll.item(), tokens + out.n_tokens
        pairs = self.valid_pairs[: self.cfg.valid.max_sentences or None]
        translator = Translator(model, self.tokenizer, self.device)
        hyps = translator.translate(
            [s for s, _ in pairs], beam=self.cfg.valid.beam_size, length_penalty=self.cfg.valid.length_penalty,
            batch_tokens=self.cfg.valid.batch_tokens,
        )  # fmt: skip
        bleu = corpus_scores([h.text for h in hyps], [t for _, t in pairs]).bleu
        return nll / max(tokens, 1), bleu

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        from tqdm import tqdm

        cfg, t = self.cfg, self.cfg.train
        self.t0 = time.monotonic()
        if self.dist.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        csv_path = self.out / "metrics.csv"
        best = self.out / "checkpoint_best.pt"
        last = self.out / "checkpoint_last.pt"
        bar = tqdm(
            total=t.max_steps, initial=self.step, disable=not (t.progress and self.dist.is_main) or None,
            unit="step", dynamic_ncols=True,
        )  # fmt: skip
        window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "t": time.monotonic()}
        it = iter(self.sampler)
        stop_reason = "max_steps"
        while self.step < t.max_steps:
            batches, it, epochs_done = self._next_batches(it)
            if epochs_done and not batches:
                stop_reason = "max_epochs"
                break
            loss, nll, tokens = self.train_step(batches)
            window["loss"] += loss
            window["nll"] += nll
            window["tokens"] += tokens
            bar.update(1)
            if self.step % t.log_every == 0 or self.step == t.max_steps:
                seconds = time.monotonic() - window["t"]
                row = {
                    "step": self.step, "epoch": self.epoch, "elapsed_s": round(self.elapsed(), 1),
                    "lr": f"{self.lr(self.step):.3e}", "train_loss": round(window["loss"] / max(window["tokens"], 1), 4),
                    "train_nll": round(window["nll"] / max(window["tokens"], 1), 4),
                    "tokens_per_s": round(window["tokens"] * self.dist.world_size / max(seconds, 1e-9)),
                }  # fmt: skip
                bar.set_postfix(loss=row["train_loss"], lr=row["lr"], tok_s=row["tokens_per_s"])
                if bar.disable and self.dist.is_main and t.progress:
                    self.log(
                        f"step {self.step}/{t.max_steps} loss {row['train_loss']:.3f} lr {row['lr']} "
                        f"{row['tokens_per_s']} tok/s elapsed {row['elapsed_s']:.0f}s"
                    )
                self._write_csv(csv_path, row)
                window = {"loss": 0.0, "nll": 0.0, "tokens": 0, "t": time.monotonic()}
            out_of_time = bool(t.max_minutes and self.elapsed() >= 60 * t.max_minutes)
            if t.max_minutes and self.dist.enabled:
                out_of_time = bool(ddp.broadcast_object(out_of_time, self.dist))  # every rank stops together
            if self.step % cfg.valid.every == 0 or self.step == t.max_steps or out_of_time or epochs_done:
                if self._validate_and_save(csv_path, best, last):
                    stop_reason = "early stopping"
                    break
            if out_of_time:
                stop_reason = "max_minutes"
                break
            if epochs_done:
                stop_reason = "max_epochs"
                break
        bar.close()
        if self.step % cfg.valid.every and stop_reason == "max_epochs" and not last.exists():
            self._validate_and_save(csv_path, best, last)
        self.info(f"stopped at step {self.step} ({stop_reason}); best valid BLEU {self.best_bleu:.2f}")
        averaged = curve = None
        if self.dist.is_main:
            averaged = self._average()
            curve = self._plot(csv_path)
        ddp.barrier(self.dist)
        return TrainResult(
            self.out, self.step, self.best_bleu, best if best.exists() else None, last if last.exists() else None,
            averaged, csv_path, curve,
        )  # fmt: skip

    def _validate_and_save(self, csv_path: Path, best: Path, last: Path) -> bool:
        """Validate (rank 0), write checkpoints, and say whether to stop early (all ranks agree)."""
        stop = False
        if self.dist.is_main:
            val_loss, bleu = self.validate()
            improved = bleu > self.best_bleu
            self.best_bleu = max(self.best_bleu, bleu)
            self.bad_validations = 0 if improved else self.bad_validations + 1
            self.log(
                f"validation at step {self.step}: loss {val_loss:.3f}, BLEU {bleu:.2f}"
                f"{' (best)' if improved else ''}"
            )
            self._write_csv(csv_path, {"step": self.step, "epoch": self.epoch, "elapsed_s": round(self.elapsed(), 1),
                                       "val_loss": round(val_loss, 4), "val_bleu": round(bleu, 2)})  # fmt: skip
            state = self._state()
            save_checkpoint(state, last)
            if improved:
                save_checkpoint(state, best)
            if self.cfg.valid.keep_last:
                save_checkpoint(state, self.out / f"checkpoint_step{self.step}.pt")
                for old in self._step_checkpoints()[: -self.cfg.valid.keep_last]:
                    old.unlink()
            patience = self.cfg.valid.patience
            stop = bool(patience and self.bad_validations >= patience)
        return bool(ddp.broadcast_object(stop, self.dist))

    def _step_checkpoints(self) -> list[Path]:
        return sorted(
            self.out.glob("checkpoint_step*.pt"), key=lambda p: int(p.stem.removeprefix("checkpoint_step"))
        )

    def _average(self) -> Path | None:
        n = self.cfg.valid.average_last
        paths = self._step_checkpoints()[-n:] if n else []
        if len(paths) < 2:
            return None
        out = save_checkpoint(average_checkpoints(paths), self.out / "checkpoint_averaged.pt")
        self.info(f"averaged the last {len(paths)} checkpoints into {out}")
        return out

    def _write_csv(self, path: Path, row: dict) -> None:
        if not self.dist.is_main:
            return
        new = not path.exists()
        with path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            if new:
                writer.writeheader()
            writer.writerow(row)

    def _plot(self, csv_path: Path) -> Path | None:
        from ..plotting import plot_learning_curve

        if not csv_path.exists():
            return None
        return plot_learning_curve(csv_path, self.out / "learning_curve.png")


def train(
    cfg: ExperimentConfig, *, resume: str | Path | None = None, overwrite: bool = False, log=print
) -> TrainResult:
    """Train (or resume) the experiment; returns where the checkpoints and metrics went."""
    trainer = Trainer(cfg, resume=resume, overwrite=overwrite, log=log)
    try:
        return trainer.run()
    finally:
        ddp.shutdown(trainer.dist)
