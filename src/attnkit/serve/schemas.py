"""What every endpoint's bodies share (each task's own are in its ``routes`` module), and the limits
a request must keep.

Requests are strict (a string where a number belongs is refused, not converted) and closed
(an unknown field is an error that names it): a typo never silently falls back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from ..decoding.options import _DEFAULTS as SEARCH_DEFAULTS
from ..decoding.options import BOUNDS, HELP, SearchOptions

SEARCH_FIELDS = tuple(SEARCH_DEFAULTS)  # every field of SearchOptions, in order


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; each is named in the error when exceeded."""

    max_body_bytes: int = 1_000_000
    max_sentences: int = 256
    max_chars: int = 2_000  # per sentence, checked before tokenizing
    max_beam: int = 16
    max_samples: int = 16  # generate: nbest when sampling


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*")
    @classmethod
    def _unicode(cls, value: Any) -> Any:
        """JSON may escape a lone UTF-16 surrogate ("\\ud800"), which is no character: refused here,
        it would fail the tokenizer (and the answer's encoding) later."""
        texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for i, text in enumerate(texts):
            if isinstance(text, str):
                bad = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
                if bad is not None:
                    where = f"item {i} has" if isinstance(value, list) else "has"
                    raise ValueError(
                        f"{where} a lone surrogate (U+{ord(bad):04X}) at character {text.index(bad)}: "
                        "not Unicode text"
                    )
        return value


class Searched:
    """A request whose fields include every SearchOptions field (each declared with :func:`option`)."""

    def search_options(self) -> SearchOptions:
        """The request's search, checked as every other search is (a ConfigError answers 422)."""
        return SearchOptions(**{name: getattr(self, name) for name in SEARCH_FIELDS})


def option(name: str, task: SearchOptions | None = None, *aliases: str) -> Any:
    """A :class:`~attnkit.decoding.SearchOptions` field: its declared bounds, its description
    (:data:`~attnkit.decoding.options.HELP`, the command line's help too) and its default (``task``:
    the task's search, where its defaults differ); ``aliases``: its names before."""
    default = SEARCH_DEFAULTS[name] if task is None else getattr(task, name)
    description = HELP[name] + (f" ({', '.join(aliases)}: its names before)" if aliases else "")
    extra: dict[str, Any] = {"validation_alias": AliasChoices(name, *aliases)} if aliases else {}
    bound = BOUNDS.get(name)
    if bound is None:
        return Field(default, description=description, **extra)
    low, high = (int(bound.low), int(bound.high)) if bound.kind is int else (bound.low, bound.high)
    if bound.open_low:
        return Field(default, gt=low, le=high, description=description, **extra)
    return Field(default, ge=low, le=high, description=description, **extra)


class ErrorResponse(BaseModel):
    error: str = Field(description="one line naming the problem")
