"""Equal-work peer models for attnkit's speed benchmark: one module per toolkit.

Every module has ``NAME`` and ``build(vocab_size, pad_id, bos_id, eos_id, ...) -> PeerAdapter`` for
the same reference model (:mod:`bench.peers.common` defines it, the shared loss and the adapter);
each adapter's ``notes`` says honestly where the peer's model differs from the reference.

The peers are optional: a peer whose packages are missing is not imported, and
:func:`available` lists the ones that can be. Install them as bench/PEERS.md says.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from .common import PeerAdapter


@dataclass(frozen=True)
class Peer:
    """One toolkit: the module under bench/peers/ that adapts it and the packages it imports."""

    module: str
    requires: tuple[str, ...]


# Command-line key -> peer. attnkit first: it is the reference of every ratio.
PEERS: dict[str, Peer] = {
    "attnkit": Peer("attnkit", ("attnkit",)),
    "torch": Peer("torch_transformer", ("torch",)),
    "hf": Peer("marian", ("transformers",)),
    "joeynmt": Peer("joeynmt", ("joeynmt",)),
    "opennmt": Peer("opennmt", ("onmt", "pyonmttok")),
    "ct2": Peer("ctranslate2", ("ctranslate2", "transformers")),
}
ALIASES = {"transformers": "hf", "marian": "hf", "ctranslate2": "ct2"}  # older spellings


def resolve(key: str) -> str:
    """The registry key for ``key`` (an alias allowed); ValueError naming the choices if unknown."""
    key = ALIASES.get(key, key)
    if key not in PEERS:
        raise ValueError(f"unknown peer {key!r}; choose from {', '.join(PEERS)}")
    return key


def available() -> list[str]:
    """The keys whose packages can be found (without importing them)."""
    return [k for k, p in PEERS.items() if all(importlib.util.find_spec(m) is not None for m in p.requires)]


def module(key: str):
    """The adapter module of a peer (imports the toolkit)."""
    return importlib.import_module(f"{__name__}.{PEERS[resolve(key)].module}")


def build(key: str, *args, **kwargs) -> PeerAdapter:
    """``module(key).build(*args, **kwargs)``: the peer's adapter for the reference model."""
    return module(key).build(*args, **kwargs)


__all__ = ["PEERS", "Peer", "PeerAdapter", "available", "build", "module", "resolve"]
