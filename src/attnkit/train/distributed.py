"""Multi-process training through torchrun: process group set-up and the few collectives we use.

``torchrun --nproc_per_node=K attnkit train ...`` sets RANK, WORLD_SIZE and LOCAL_RANK; without them
training runs in one process. NCCL on GPUs, gloo on CPUs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device_type: str) -> DistInfo:
    """Join the process group that torchrun describes in the environment (once per process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    return info


def all_reduce_sum(value: float, info: DistInfo, device: torch.device) -> float:
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.item()


def broadcast_object(obj, info: DistInfo):
    """Rank 0's ``obj`` on every rank (e.g. the tokenizer trained once)."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_object(obj, info: DistInfo) -> list:
    """Every rank's ``obj``, in rank order, on every rank (a collective: all ranks must call it)."""
    if not info.enabled:
        return [obj]
    out: list = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank``'s random streams: ``seed`` itself on rank 0 (a one-process run is
    unchanged), a derived one elsewhere, so the ranks draw different dropout masks."""
    if rank == 0:
        return seed
    return int(np.random.SeedSequence([seed % 2**63, rank]).generate_state(1, np.uint64)[0] % 2**63)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
