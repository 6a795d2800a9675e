"""Request and response bodies of the JSON API, and the limits a request must keep.

Requests are strict (a string where a number belongs is refused, not converted) and closed
(an unknown field is an error that names it): a typo never silently falls back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from ..decoding.options import _DEFAULTS as SEARCH_DEFAULTS
from ..decoding.options import BOUNDS, SearchOptions
from ..tasks.captioning.captioner import SEARCH as CAP
from ..tasks.language_model.generator import SEARCH as LM


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; each is named in the error when exceeded."""

    max_body_bytes: int = 1_000_000
    max_sentences: int = 256
    max_chars: int = 2_000  # per sentence, checked before tokenizing
    max_beam: int = 16
    max_samples: int = 16  # generate: nbest when sampling


class _Request(BaseModel):
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


def _option(name: str, description: str, task: SearchOptions | None = None, *aliases: str) -> Any:
    """A :class:`~attnkit.decoding.SearchOptions` field: its declared bounds, and its default
    (``task``: the task's search, where its defaults differ); ``aliases``: its names before."""
    default = SEARCH_DEFAULTS[name] if task is None else getattr(task, name)
    extra: dict[str, Any] = {"validation_alias": AliasChoices(name, *aliases)} if aliases else {}
    bound = BOUNDS.get(name)
    if bound is None:
        return Field(default, description=description, **extra)
    if bound.open_low:
        return Field(default, gt=bound.low, le=bound.high, description=description, **extra)
    return Field(default, ge=bound.low, le=bound.high, description=description, **extra)


class TranslateRequest(_Request):
    text: str | list[str] = Field(description="one sentence, or a list of sentences")
    model: str | None = Field(
        None, description="a name from GET /v1/models; default: the first translation model"
    )
    prefix: str | list[str] | None = Field(
        None,
        description="each translation's first words, forced: one string for every sentence, or a list "
        "with one per sentence ('' for none)",
    )
    # The search: every field of attnkit.decoding.SearchOptions, its name, default and bounds.
    beam: int = _option("beam", "beam size; 1 = greedy")
    nbest: int = _option("nbest", "hypotheses returned per sentence (at most beam), or samples drawn")
    length_penalty: float = _option("length_penalty", "GNMT length penalty alpha")
    max_len_a: float = _option("max_len_a", "output pieces at most max_len_a * source pieces + max_len_b")
    max_len_b: int = _option("max_len_b", "see max_len_a (eos included)")
    min_length: int = _option("min_length", "target pieces before the end (the length limit wins)")
    no_repeat_ngram_size: int = _option("no_repeat_ngram_size", "no n-gram of this size twice; 0 = off")
    repetition_penalty: float = _option(
        "repetition_penalty", "divides the score of every piece already out (CTRL); 1 = off"
    )
    sample: bool = _option("sample", "sample translations instead of searching")
    temperature: float = _option("temperature", "sampling temperature")
    top_k: int = _option("top_k", "sample from the k most probable pieces; 0 = all")
    top_p: float = _option("top_p", "nucleus sampling: the smallest set of mass top_p")
    seed: int = _option("seed", "the same seed gives the same samples")

    def search_options(self) -> SearchOptions:
        """The request's search, checked (a ConfigError answers 422)."""
        return SearchOptions(**{name: getattr(self, name) for name in SEARCH_DEFAULTS})


class AttentionRequest(_Request):
    text: str = Field(description="one source sentence")
    model: str | None = None
    beam: int = Field(4, ge=1, description="beam size of the translation whose attention is shown")


class GenerateRequest(_Request):
    text: str = Field(description="the prompt (may be empty: generate from the start)")
    model: str | None = Field(
        None, description="a name from GET /v1/models; default: the first language model"
    )
    # The search: every field of SearchOptions, its name and bounds, a language model's defaults.
    beam: int = _option("beam", "beam size; 1 = greedy", LM)
    nbest: int = _option(
        "nbest",
        "continuations returned: the beam's best, or samples (num_samples: its name before)",
        LM,
        "num_samples",
    )
    length_penalty: float = _option("length_penalty", "GNMT length penalty alpha", LM)
    max_len_a: float = _option("max_len_a", "new pieces at most max_len_a * prompt pieces + max_len_b", LM)
    max_len_b: int = _option(
        "max_len_b",
        "see max_len_a, eos included (max_new_tokens, max_tokens: its names before)",
        LM,
        "max_new_tokens",
        "max_tokens",
    )
    min_length: int = _option("min_length", "new pieces before the end (the length limit wins)", LM)
    no_repeat_ngram_size: int = _option(
        "no_repeat_ngram_size", "no n-gram of this size twice, the prompt's included; 0 = off", LM
    )
    repetition_penalty: float = _option(
        "repetition_penalty", "divides the score of every piece already there (CTRL); 1 = off", LM
    )
    sample: bool = _option("sample", "sample instead of searching (temperature, top_k, top_p, seed)", LM)
    temperature: float = _option("temperature", "sampling temperature", LM)
    top_k: int = _option("top_k", "sample from the k most probable tokens; 0 = all", LM)
    top_p: float = _option("top_p", "nucleus sampling: the smallest set of mass top_p", LM)
    seed: int = _option("seed", "the same seed gives the same samples", LM)
    stream: bool = Field(
        False,
        description="answer as Server-Sent Events: a 'token' event per token as it is chosen, then a "
        "'result' event (this endpoint's answer), then 'data: [DONE]'; greedy or sampling, one continuation",
    )

    def search_options(self) -> SearchOptions:
        """The request's search, checked as every other search is (a ConfigError answers 422)."""
        return SearchOptions(**{name: getattr(self, name) for name in SEARCH_DEFAULTS})


class CaptionQuery(BaseModel):
    """``/v1/caption``'s query (the body is the image): every field of SearchOptions, a captioner's
    defaults. Not strict: a query's values arrive as text."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="a name from GET /v1/models; default: the first captioner")
    attention: bool = Field(False, description="also every layer's and head's attention over the regions")
    beam: int = _option("beam", "beam size; 1 = greedy", CAP)
    nbest: int = _option("nbest", "captions returned: the beam's best (at most beam), or samples", CAP)
    length_penalty: float = _option("length_penalty", "GNMT length penalty alpha", CAP)
    max_len_a: float = _option("max_len_a", "an image has no pieces: max_len_b alone counts", CAP)
    max_len_b: int = _option("max_len_b", "caption pieces at most, eos included", CAP)
    min_length: int = _option("min_length", "pieces before the end (the length limit wins)", CAP)
    no_repeat_ngram_size: int = _option("no_repeat_ngram_size", "no n-gram of this size twice; 0 = off", CAP)
    repetition_penalty: float = _option(
        "repetition_penalty", "divides the score of every piece already out (CTRL); 1 = off", CAP
    )
    sample: bool = _option("sample", "sample captions instead of searching", CAP)
    temperature: float = _option("temperature", "sampling temperature", CAP)
    top_k: int = _option("top_k", "sample from the k most probable pieces; 0 = all", CAP)
    top_p: float = _option("top_p", "nucleus sampling: the smallest set of mass top_p", CAP)
    seed: int = _option("seed", "the same seed gives the same samples", CAP)

    def search_options(self) -> SearchOptions:
        return SearchOptions(**{name: getattr(self, name) for name in SEARCH_DEFAULTS})


class ClassifyRequest(_Request):
    text: str | list[str] = Field(description="one text, or a list of texts")
    model: str | None = Field(None, description="a name from GET /v1/models; default: the first classifier")
    top_k: int = Field(1, ge=1, description="labels returned per text, most probable first")


class Hypothesis(BaseModel):
    text: str
    score: float


class TranslationOut(BaseModel):
    text: str
    score: float = Field(description="log-probability over the GNMT length penalty")
    nbest: list[Hypothesis]


class TranslateResponse(BaseModel):
    model: str
    translations: list[TranslationOut] = Field(description="one per input sentence, in order")


class ErrorResponse(BaseModel):
    error: str = Field(description="one line naming the problem")
