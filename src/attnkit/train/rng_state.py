"""A process's random streams in a checkpoint: captured on every rank, restored on each from its own."""

from __future__ import annotations

import random

import torch


def rng_state() -> dict:
    """This process's random streams (dropout, Python's ``random``)."""
    py = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "python": [py[0], list(py[1]), py[2]],
    }


def restore_rng(state: dict, rank: int) -> None:
    """Rank ``rank``'s streams from checkpoint ``state`` (rank 0's are ``state["rng"]``)."""
    ranks = state.get("rng_ranks")  # absent before per-rank streams were kept, and in 1-process runs
    rng = state["rng"] if rank == 0 else ranks[rank] if ranks else None
    if rng is None:  # an older multi-process checkpoint: this rank keeps its own seed
        return
    torch.set_rng_state(rng["torch"])
    if torch.cuda.is_available() and rng.get("cuda") is not None:
        torch.cuda.set_rng_state_all(rng["cuda"])
    random.setstate((rng["python"][0], tuple(rng["python"][1]), rng["python"][2]))
