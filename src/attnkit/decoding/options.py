"""How to search, as one object: checked once where it is made, then passed down whole.

The command line (``attnkit.plugin.flags.add_search_flags``), the HTTP schema
(``attnkit.plugin.http``) and the Python API (``Translator.translate(text, options)``) each build
a :class:`SearchOptions`; a test keeps the three in step, field by field, with the same names and
defaults. :func:`~.pick.search` then picks the strategy (greedy, beam or sampling) in one place, for
every caller. A forced prefix is not an option: it belongs to its sentence, and is passed beside
them. No torch here: every command's ``--help`` declares its search flags from this class.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .defaults import BEAM, BOUNDS, LENGTH_PENALTY, MAX_LEN_A, MAX_LEN_B, NBEST, TEMPERATURE, TOP_K, TOP_P

if TYPE_CHECKING:
    from .controls import Controls
    from .sampling import SamplingConfig


def check_nbest(beam: int, nbest: int, *, name: str = "nbest", can_sample: bool = False) -> None:
    """An n-best list comes from the beam, so it holds at most ``beam`` hypotheses.

    The one rule for the Python API, the command line and the server (which answers 422 with this
    message): asking for more is an error, never a silently wider beam. ``name`` is the caller's
    word for the count (``num_samples``, ``--num-samples``); ``can_sample``: say that sampling draws
    any number.
    """
    if not 1 <= nbest <= beam:
        fix = "sample, or widen the beam" if can_sample else "widen the beam"
        raise ConfigError(f"{name} {nbest} must be between 1 and the beam size {beam}: {fix}")


@dataclass(frozen=True)
class SearchOptions:
    """Every option of a search, with the bounds :meth:`check` holds it to.

    beam: hypotheses kept per sentence (1 = greedy search); nbest: results per sentence (at most
    the beam, or samples drawn); length_penalty: GNMT alpha (0 = off); max_len_a, max_len_b: at
    most a * source tokens + b output tokens, eos included (a source-less model: b);
    min_length: tokens before eos may end a sequence; no_repeat_ngram_size, repetition_penalty:
    :class:`~.controls.Controls` (0 and 1 = off); sample: draw instead of searching, reshaped by
    temperature, top_k (0 = off) and top_p (1 = off), from a generator seeded with ``seed``.
    """

    beam: int = BEAM
    nbest: int = NBEST
    length_penalty: float = LENGTH_PENALTY
    max_len_a: float = MAX_LEN_A
    max_len_b: int = MAX_LEN_B
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    sample: bool = False
    temperature: float = TEMPERATURE
    top_k: int = TOP_K
    top_p: float = TOP_P
    seed: int = 0

    def __post_init__(self) -> None:
        self.check()

    @classmethod
    def of(cls, options: SearchOptions | None = None, **fields: Any) -> SearchOptions:
        """``options`` (or the defaults) with ``fields`` changed; an unknown field is a ConfigError."""
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(fields) - known):
            choices = ", ".join(sorted(known))
            raise ConfigError(f"unknown search option(s) {', '.join(unknown)}: choose from {choices}")
        return dataclasses.replace(options or cls(), **fields)

    def check(self) -> None:
        """Each field within its declared bounds (:data:`BOUNDS`), else one ConfigError naming it
        (the command line exits 2 with it, the server answers 422)."""
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            if not bound.holds(value):
                raise ConfigError(f"{name} must be {bound.describe()}, got {value!r}")
        if self.max_len_a == 0 and self.max_len_b == 0:
            raise ConfigError("max_len_a, max_len_b are both 0: no token could be produced")
        if self.max_len_a == 0 and self.min_length >= self.max_len_b:  # a limit known before decoding
            raise ConfigError(
                f"min_length {self.min_length} is more than the length limit allows "
                f"(max_len_b {self.max_len_b}, eos included)"
            )
        if not isinstance(self.sample, bool):
            raise ConfigError(f"sample must be true or false, got {self.sample!r}")
        if not self.sample:
            check_nbest(self.beam, self.nbest, can_sample=True)
            changed = [f for f in ("temperature", "top_k", "top_p") if getattr(self, f) != _DEFAULTS[f]]
            if changed:
                raise ConfigError(f"{', '.join(changed)} shape sampling: ask for it with sample (--sample)")

    @property
    def controls(self) -> Controls | None:
        from .controls import Controls  # torch: imported by a search, not by a --help

        controls = Controls(self.no_repeat_ngram_size, self.repetition_penalty)
        return controls if controls.active else None

    @property
    def sampling(self) -> SamplingConfig | None:
        from .sampling import SamplingConfig

        return SamplingConfig(self.temperature, self.top_k, self.top_p) if self.sample else None

    @property
    def greedy(self) -> bool:
        return not self.sample and self.beam == 1 and self.nbest == 1


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SearchOptions)}  # name -> default, in order
