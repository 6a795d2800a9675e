"""Request and response bodies of the JSON API, and the limits a request must keep.

Requests are strict (a string where a number belongs is refused, not converted) and closed
(an unknown field is an error that names it): a typo never silently falls back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; each is named in the error when exceeded."""

    max_body_bytes: int = 1_000_000
    max_sentences: int = 256
    max_chars: int = 2_000  # per sentence, checked before tokenizing
    max_beam: int = 16
    max_samples: int = 16  # generate: num_samples


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


class TranslateRequest(_Request):
    text: str | list[str] = Field(description="one sentence, or a list of sentences")
    model: str | None = Field(
        None, description="a name from GET /v1/models; default: the first translation model"
    )
    beam: int = Field(4, ge=1, description="beam size; 1 = greedy")
    nbest: int = Field(1, ge=1, description="hypotheses returned per sentence (at most beam)")
    length_penalty: float = Field(0.6, ge=0.0, le=10.0, description="GNMT length penalty alpha")
    prefix: str | list[str] | None = Field(
        None,
        description="each translation's first words, forced: one string for every sentence, or a list "
        "with one per sentence ('' for none)",
    )
    min_length: int = Field(
        0, ge=0, le=1000, description="target pieces before the end (the length limit wins)"
    )
    no_repeat_ngram_size: int = Field(0, ge=0, le=1000, description="no n-gram of this size twice; 0 = off")
    repetition_penalty: float = Field(
        1.0, gt=0.0, le=100.0, description="divides the score of every piece already out (CTRL); 1 = off"
    )


class AttentionRequest(_Request):
    text: str = Field(description="one source sentence")
    model: str | None = None
    beam: int = Field(4, ge=1, description="beam size of the translation whose attention is shown")


class GenerateRequest(_Request):
    text: str = Field(description="the prompt (may be empty: generate from the start)")
    model: str | None = Field(
        None, description="a name from GET /v1/models; default: the first language model"
    )
    max_tokens: int = Field(50, ge=1, description="new subword tokens at most")
    beam: int = Field(1, ge=1, description="beam size when not sampling; 1 = greedy")
    sample: bool = Field(False, description="sample instead of searching (temperature, top_k, top_p, seed)")
    temperature: float = Field(1.0, gt=0.0, le=100.0)
    top_k: int = Field(0, ge=0, description="sample from the k most probable tokens; 0 = all")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling: the smallest set of mass top_p")
    num_samples: int = Field(1, ge=1, description="continuations returned (samples, or the beam's best)")
    seed: int = Field(0, ge=0, description="the same seed gives the same samples")
    min_length: int = Field(0, ge=0, description="new pieces before the end (at most max_tokens)")
    no_repeat_ngram_size: int = Field(
        0, ge=0, le=1000, description="no n-gram of this size twice, the prompt's included; 0 = off"
    )
    repetition_penalty: float = Field(
        1.0, gt=0.0, le=100.0, description="divides the score of every piece already there (CTRL); 1 = off"
    )
    stream: bool = Field(
        False,
        description="answer as Server-Sent Events: a 'token' event per token as it is chosen, then a "
        "'result' event (this endpoint's answer), then 'data: [DONE]'; greedy or sampling, one continuation",
    )


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
