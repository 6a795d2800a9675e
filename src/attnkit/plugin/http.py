"""What a task's endpoints build on: the bodies every endpoint shares (each task's own are in its
``routes`` module), the limits a request must keep, the :class:`Call` a route hands to the server's
decoding, and the :class:`ServeError` it raises to refuse a request.

Requests are strict (a string where a number belongs is refused, not converted) and closed
(an unknown field is an error that names it): a typo never silently falls back to a default. The
OpenAPI schema is the contract: what it calls valid is taken, so a number without a fraction,
``1.0``, is an integer where the schema says ``integer``, as JSON Schema counts it.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from ..decoding.defaults import BOUNDS, HELP
from ..decoding.options import _DEFAULTS as SEARCH_DEFAULTS
from ..decoding.options import SearchOptions


class ServeError(Exception):
    """A request the server refuses: its status and the line it answers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass(frozen=True)
class Call:
    """What a request asks of a model. Equal calls may share one batched model call."""

    model: str
    op: str  # an operation of the model's task (its served model's ``operation``)
    options: tuple[tuple[str, Any], ...] = ()  # sorted (name, value) pairs: hashable

    @classmethod
    def of(cls, model: str, op: str, **options: Any) -> Call:
        return cls(model, op, tuple(sorted(options.items())))


SEARCH_FIELDS = tuple(SEARCH_DEFAULTS)  # every field of SearchOptions, in order
_SEARCH = SearchOptions()  # its defaults


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

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        """``1.0`` where an integer belongs is that integer (JSON Schema's ``integer`` takes it);
        ``1.5``, ``true`` and ``"1"`` stay refused by the strict fields."""
        if not isinstance(data, dict):
            return data
        keys = _integer_keys(cls)
        return {
            k: int(v) if k in keys and type(v) is float and v.is_integer() and abs(v) < 2**63 else v
            for k, v in data.items()
        }

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


def _integer_keys(model: type[BaseModel]) -> frozenset[str]:
    """The names (and alias names) of ``model``'s integer fields."""
    keys = set()
    for name, field in model.model_fields.items():
        if field.annotation in (int, int | None):
            keys.add(name)
            alias = field.validation_alias
            if isinstance(alias, AliasChoices):
                keys.update(a for a in alias.choices if isinstance(a, str))
            elif isinstance(alias, str):
                keys.add(alias)
    return frozenset(keys)


class Searched(BaseModel):
    """A request that takes a search: every :class:`~attnkit.decoding.SearchOptions` field, declared
    here once with its name, bounds and description. A task's request subclasses it and states only
    what differs: ``search``, its defaults (its task's SearchOptions), and ``search_aliases``, the
    names a field had before."""

    search: ClassVar[SearchOptions | None] = None
    search_aliases: ClassVar[dict[str, tuple[str, ...]]] = {}

    beam: int = Field(_SEARCH.beam)
    nbest: int = Field(_SEARCH.nbest)
    length_penalty: float = Field(_SEARCH.length_penalty)
    max_len_a: float = Field(_SEARCH.max_len_a)
    max_len_b: int = Field(_SEARCH.max_len_b)
    min_length: int = Field(_SEARCH.min_length)
    no_repeat_ngram_size: int = Field(_SEARCH.no_repeat_ngram_size)
    repetition_penalty: float = Field(_SEARCH.repetition_penalty)
    sample: bool = Field(_SEARCH.sample)
    temperature: float = Field(_SEARCH.temperature)
    top_k: int = Field(_SEARCH.top_k)
    top_p: float = Field(_SEARCH.top_p)
    seed: int = Field(_SEARCH.seed)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Each search field gets its bounds, description, the task's default and aliases."""
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.model_fields
        own = {name: field for name, field in fields.items() if name not in SEARCH_FIELDS}
        search = {
            name: FieldInfo.merge_field_infos(
                fields[name], option(name, cls.search, *cls.search_aliases.get(name, ()))
            )
            for name in SEARCH_FIELDS
        }
        cls.__pydantic_fields__ = own | search  # the request's own fields first, as a reader expects
        cls.model_rebuild(force=True)

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


def describe(err: Any) -> str:
    """One pydantic error (a dict of its ``errors()``) as 'field: problem'."""
    loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query")]
    where = ".".join(loc) or "body"
    if err.get("type") == "extra_forbidden":
        return f"unknown field {where!r}"
    if err.get("type") == "missing":
        return f"missing field {where!r}"
    return f"{where}: {err.get('msg', 'invalid')}"


FORM = "application/x-www-form-urlencoded"
BODY_TYPES = ("application/json", FORM)  # what parse_body reads


def parse_body(raw: bytes, content_type: str, kind: type[Request]) -> Any:
    """A body sent as JSON or as a form (LibreTranslate's clients send either), as ``kind``; a
    form's values are strings, converted where the field's type allows. Anything else: a 400."""
    try:
        if content_type.split(";")[0].strip().lower() == FORM:
            pairs = urllib.parse.parse_qs(raw.decode("utf-8"), keep_blank_values=True)
            return kind.model_validate(
                {k: v[0] if len(v) == 1 else v for k, v in pairs.items()}, strict=False
            )
        return kind.model_validate(json.loads(raw or b"null"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ServeError(400, "the body is neither JSON nor a form") from None
    except ValidationError as e:
        raise ServeError(400, "; ".join(describe(x) for x in e.errors()[:5])) from None


def body_schema(kind: type[Request]) -> dict[str, Any]:
    """An endpoint's ``openapi_extra`` for a body :func:`parse_body` reads: ``kind``'s schema, as
    JSON and as a form."""
    schema = kind.model_json_schema()
    return {"requestBody": {"required": True, "content": {t: {"schema": schema} for t in BODY_TYPES}}}
