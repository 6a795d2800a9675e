"""Building a training run from its config: device and processes, seeds, data, tokenizer, model,
optimizer. Everything here runs once, before the loop; :mod:`.trainer` only runs what was built.

Checks that can fail run here, before the first step: a bad validation split or a vocabulary that
contradicts the config is found at start-up, not after hours of training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..checkpoint import build_model, load_checkpoint, model_from_checkpoint
from ..data import bidirectional, subword_sampling
from ..data.batching import TokenBatchSampler
from ..data.encoded import Encoded
from ..data.fingerprint import check_same_data, fingerprint
from ..data.prepared import Prepared, open_prepared
from ..data.tokenizer import SubwordTokenizer
from ..device import resolve_device
from ..errors import CheckpointError, ConfigError, DataError
from ..plugin import task_for
from ..plugin.training import Task, TextPairTask, check_metrics, takes_text_pairs
from ..precision import amp_dtype, resolve_precision
from . import distributed as ddp
from . import finetune
from .config import ExperimentConfig
from .resume_checks import check_resume


@dataclass
class Setup:
    """A run, built: what the loop needs and nothing it has to build itself."""

    cfg: ExperimentConfig
    device: torch.device
    dist: ddp.DistInfo
    precision: str  # fp32, bf16 or fp16 (resolved from train.precision)
    task: Task
    tokenizer: SubwordTokenizer
    train: Encoded
    valid: Encoded
    valid_records: list
    sampler: TokenBatchSampler
    model: nn.Module
    optimizer: torch.optim.Optimizer
    d_model: int  # for the noam schedule
    resume_state: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # for the log: skipped pairs, oversized batches
    data_fingerprint: dict[str, Any] = field(default_factory=dict)  # in every checkpoint: what it trained on


def build(cfg: ExperimentConfig, *, resume: str | Path | None = None) -> Setup:
    """Build the run of ``cfg`` (or continue the one in checkpoint ``resume``)."""
    device, dist = _device_and_ranks(cfg)
    t = cfg.train
    precision = resolve_precision(t.precision, device)
    resume_state = load_checkpoint(resume) if resume else None
    init_state = finetune.load_init(cfg) if t.init_from and resume_state is None else None
    tokens_from = resume_state if resume_state is not None else init_state  # the tokenizer's checkpoint
    torch.manual_seed(t.seed)
    random.seed(t.seed)
    info = task_for(cfg.task, cfg.arch)
    task: Task = info.load("training")(cfg, amp_dtype(precision))
    check_metrics(task, info.name)  # before any data is read, not at the first validation
    subword_sampling.check(cfg, takes_text_pairs(task), cfg.arch)
    bidirectional.check(cfg)
    prepared, tokenizer, records, valid_records = _data(cfg, task, tokens_from, dist)
    _check_tokenizer(cfg, task, tokenizer)
    if t.init_from:  # the model is the checkpoint's (resumed or initial), dropout aside
        model_cfg = finetune.model_config(cfg, tokens_from or {}, task.model_fields())
    else:
        model_cfg = cfg.model_config(tokenizer.vocabulary, task.model_fields())
    train, valid = _encoded(cfg, task, prepared, records, valid_records, tokenizer, model_cfg)
    del records  # the text is encoded: a rank keeps only the arrays
    data_fingerprint = fingerprint(train)
    sampler = TokenBatchSampler(
        train.lengths,
        t.max_tokens,
        shuffle=True,
        seed=t.seed,
        rank=dist.rank,
        world_size=dist.world_size,
        epoch_size=train.epoch_size,
        epoch_indices=train.epoch_indices,
    )
    notes = _notes(cfg, train, valid, sampler, precision == "bf16", device)
    model = _model(cfg, task, model_cfg, dist, resume, resume_state, init_state)
    if t.freeze:
        n = finetune.freeze(model, t.freeze, arch=cfg.arch)
        notes.append(f"train.freeze: {', '.join(t.freeze)} fixed ({n:,} parameters)")
    model.to(device)
    if dist.rank:  # the weights are rank 0's (DDP copies them); dropout differs per rank from here on
        torch.manual_seed(ddp.rank_seed(t.seed, dist.rank))
        random.seed(ddp.rank_seed(t.seed, dist.rank))
    optimizer = torch.optim.Adam(
        [p for p in model.parameters() if p.requires_grad],
        lr=t.lr,
        betas=(t.beta1, t.beta2),
        eps=t.eps,
        weight_decay=t.weight_decay,
        fused=True,  # one kernel over all parameters, on CPU and GPU alike
    )
    if resume_state is not None:  # the config checked first (_model): a changed key is named as such
        check_same_data(resume_state.get("data_fingerprint"), data_fingerprint, str(resume))
        optimizer.load_state_dict(resume_state["optimizer"])
        sampler.load_state_dict(resume_state["sampler"])
    d_model = getattr(model_cfg, "d_model", getattr(model_cfg, "hidden_size", 512))
    run = (cfg, device, dist, precision, task, tokenizer, train, valid, valid_records, sampler, model)
    return Setup(*run, optimizer, d_model, resume_state, notes, data_fingerprint)


def _device_and_ranks(cfg: ExperimentConfig):
    """The device this process trains on, and its place among the processes (DDP, one GPU each)."""
    device = resolve_device(cfg.train.device)
    dist = ddp.init_distributed(device.type)
    if dist.enabled and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
        torch.cuda.set_device(device)
    return device, dist


def _data(cfg: ExperimentConfig, task: Task, tokens_from: dict | None, dist):
    """(prepared store or None, tokenizer, training records, validation records): the corpus read
    and checked, the tokenizer trained (or the checkpoint's), or a prepared store opened."""
    t = cfg.train
    prepared = None
    if cfg.data.prepared:  # token ids from `attnkit prepare`: no text is read or tokenized here
        prepared = _open_prepared(cfg, task, tokens_from)
        tokenizer, records, valid_records = prepared.tokenizer, [], prepared.valid_records
    else:
        records = task.load(cfg.data, "train")  # first: a classifier's label set comes from it
        valid_records = task.load(cfg.data, "valid")
        for name, part, rows in (("training", "train", records), ("validation", "valid", valid_records)):
            if not any(map(_has_text, rows)):  # found now, not after the tokenizer or the training
                raise DataError(f"the {name} corpus ({cfg.data.spec(part).describe()}) is empty or all blank")
        tokenizer = _tokenizer(task, records, tokens_from, dist, t.seed)
    return prepared, tokenizer, records, valid_records


def _check_tokenizer(cfg: ExperimentConfig, task: Task, tokenizer: SubwordTokenizer) -> None:
    """What the tokenizer rules out: bidirectional training without one vocabulary, sampling without
    n-best segmentations."""
    bidirectional.check_tokenizer(cfg, takes_text_pairs(task), tokenizer, cfg.arch)
    subword_sampling.check_tokenizer(cfg, tokenizer)  # e.g. a BPE tokenizer from a checkpoint


def _encoded(cfg: ExperimentConfig, task: Task, prepared, records, valid_records, tokenizer, model_cfg):
    """The training and validation examples as token ids, within the model's positions."""
    max_len = min(cfg.data.max_len, model_cfg.max_len - 1)  # bos/eos take one position
    if prepared is not None:
        assert isinstance(task, TextPairTask)  # _open_prepared refused any other
        train = task.encode_store(prepared.train, prepared.counts("train"), max_len, split="train")
        valid = task.encode_store(prepared.valid, prepared.counts("valid"), max_len, split="valid")
    else:
        train = task.encode(records, tokenizer, max_len, split="train")
        # a task that validates on the raw records (its one evaluation function) encodes nothing here
        valid = (
            task.encode(valid_records, tokenizer, max_len, split="valid")
            if task.encodes_valid
            else Encoded([], [])
        )
    return train, valid


def _notes(cfg: ExperimentConfig, train: Encoded, valid: Encoded, sampler, bf16: bool, device) -> list[str]:
    """What the run's header says besides the model: dropped examples, the training's options."""
    notes = [n for n in (train.dropped, valid.dropped) if n]
    notes += [n for n in (bidirectional.note(cfg, sampler), subword_sampling.note(cfg)) if n]
    if sampler.n_oversized:
        notes.append(f"{sampler.n_oversized} training pair(s) exceed train.max_tokens; each is its own batch")
    if bf16 and device.type == "cpu" and not _cpu_has_bf16():
        notes.append(
            "train.precision=bf16 on a CPU without AMX or AVX512-BF16: bf16 products are emulated here and "
            "likely slower than fp32 (train.precision=fp32)"
        )
    elif bf16 and device.type == "cpu" and _uses_glibc_malloc():
        notes.append(
            "train.precision=bf16 on a CPU with glibc's allocator: memory grows by gigabytes and steps slow "
            "down over a long run; LD_PRELOAD=libjemalloc.so.2 keeps both level (docs/BENCHMARKS.md)"
        )
    return notes


def _model(cfg: ExperimentConfig, task: Task, model_cfg, dist, resume, resume_state, init_state):
    """The model: the checkpoint's when resuming (checked against this run first), the initial
    checkpoint's when fine-tuning, else a new one."""
    t = cfg.train
    if resume_state is not None:
        saved_world = resume_state.get("world_size")  # absent in checkpoints older than per-rank streams
        if saved_world is not None and saved_world != dist.world_size:
            raise ConfigError(
                f"{resume} was written by a run of {saved_world} process(es), this one has "
                f"{dist.world_size}: each process's data and random streams are in the checkpoint, so "
                f"resume with {saved_world} (torchrun --nproc_per_node x --nnodes)"
            )
        check_resume(resume_state, cfg, model_cfg, path=str(resume))  # before any step: nothing to undo
        _check_fields(
            resume_state, task, f"{resume}: the checkpoint's", "resume on the data it was trained on"
        )
        # with train.ema_decay, "model" holds the averaged weights and "raw_model" the trained ones
        model = model_from_checkpoint(
            resume_state | {"model": resume_state.get("raw_model", resume_state["model"])}
        )
    elif init_state is not None:
        _check_fields(
            init_state, task, f"train.init_from: {t.init_from}'s", "fine-tune on data with its labels"
        )
        model = model_from_checkpoint(init_state | {"model_config": model_cfg.to_dict()})
    else:
        model = build_model(cfg.arch, model_cfg.to_dict())
    return model


def _cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AMX tiles or AVX512-BF16), where autocast pays."""
    cpu = torch.cpu
    checks = [getattr(cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
    return any(check() for check in checks if check is not None)


def _uses_glibc_malloc() -> bool:
    """Whether this Linux process allocates with glibc: no jemalloc or tcmalloc mapped (an LD_PRELOAD)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:  # not Linux: nothing known to say
        return False
    return "jemalloc" not in maps and "tcmalloc" not in maps


def _has_text(record) -> bool:
    """A sentence pair needs both sides; other records (a text, a text and a label) their text."""
    if isinstance(record, str):
        return bool(record.strip())
    if isinstance(record, tuple) and len(record) == 2 and all(isinstance(x, str) for x in record):
        return all(x.strip() for x in record)
    return True


def _check_fields(state: dict, task: Task, whose: str, fix: str) -> None:
    """What the training data fixes beyond the model (a classifier's label names) equals the checkpoint's."""
    for key, value in task.checkpoint_fields().items():
        if state.get(key) != value:
            raise CheckpointError(
                f"{whose} {key} ({state.get(key)}) differ from the training data's ({value}); {fix}"
            )


def _open_prepared(cfg: ExperimentConfig, task: Task, resume_state) -> Prepared:
    """``data.prepared``, checked; a resumed or fine-tuned run must have been trained with its tokenizer."""
    if not takes_text_pairs(task):
        raise ConfigError(
            f"data.prepared: prepared data holds token ids of text pairs, which model.arch {cfg.arch!r} "
            "does not train from; set data.prepared=''"
        )
    prepared = open_prepared(cfg)
    if resume_state is not None:
        saved = SubwordTokenizer.from_state_dict(resume_state["tokenizer"])
        if saved.fingerprint() != prepared.tokenizer.fingerprint():
            raise CheckpointError(
                f"the checkpoint's tokenizer is not the one in {cfg.data.prepared}: "
                + (
                    "prepare the data again with train.init_from set (it takes the checkpoint's tokenizer)"
                    if cfg.train.init_from
                    else "resume on the data it was trained on"
                )
            )
    return prepared


def _tokenizer(task: Task, records: list, resume_state, dist: ddp.DistInfo, seed: int) -> SubwordTokenizer:
    """From the checkpoint when resuming; else trained once (rank 0) and sent to the other ranks."""
    if resume_state is not None:
        return SubwordTokenizer.from_state_dict(resume_state["tokenizer"])
    tok = task.train_tokenizer(records, seed) if dist.is_main else None
    state = ddp.broadcast_object(tok.state_dict() if tok else None, dist)
    return tok or SubwordTokenizer.from_state_dict(state)
