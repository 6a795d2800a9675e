"""Translation's endpoints: ``POST /v1/translate`` (a search over one or more sentences),
``POST /v1/attention`` (every attention map of one translation) and LibreTranslate's
(:mod:`.libretranslate`), added by the server (its package's ``routes.add_routes``) to its app."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, WithJsonSchema

from ...decoding.defaults import BEAM
from ...plugin.http import Call, Limits, Request, Searched, ServeError
from . import libretranslate
from .segments import split_texts
from .served import TranslationModel


class TranslateRequest(Request, Searched):
    text: str | list[str] = Field(description="one sentence, or a list of sentences")
    model: str | None = Field(
        None, description="a name from GET /v1/models; default: the first translation model"
    )
    prefix: str | list[str] | None = Field(
        None,
        description="each translation's first words, forced: one string for every sentence, or a list "
        "with one per sentence ('' for none)",
    )
    split_sentences: bool = Field(
        False,
        description="split each text into sentences, translate them in one batch and join them back with "
        "the text's whitespace and line breaks (its score: their mean)",
    )


class AttentionRequest(Request):
    # the schema says not blank; the handler refuses a blank one in its own words
    text: Annotated[str, WithJsonSchema({"type": "string", "pattern": r"\S"})] = Field(
        description="one source sentence, not blank"
    )
    model: str | None = None
    beam: int = Field(BEAM, ge=1, description="beam size of the translation whose attention is shown")
    flow: bool = Field(
        False,
        description="add attention flow to each kind's rollout (seconds; sentences of at most 64 pieces)",
    )


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


def add_routes(app: FastAPI, server: Any) -> None:
    """``/v1/translate`` and ``/v1/attention``, and LibreTranslate's (:mod:`.libretranslate`)
    (``server``: :class:`attnkit.serve.app.Server`)."""
    limits = server.limits
    libretranslate.add_routes(app, server)

    @app.post("/v1/translate", response_model=TranslateResponse, summary="translate one or more sentences")
    async def translate(req: TranslateRequest) -> JSONResponse:
        model: TranslationModel = server.resolve(req.model, "translate")
        sentences = [req.text] if isinstance(req.text, str) else req.text
        if len(sentences) > limits.max_sentences:
            raise ServeError(
                413, f"too many sentences: {len(sentences)} (the limit is {limits.max_sentences} per request)"
            )
        server.check_beam(req.beam)
        options = req.search_options()  # a ConfigError answers 422, as the command line exits 2
        if options.sample and options.nbest > limits.max_samples:
            raise ServeError(422, f"nbest {options.nbest} is over the limit of {limits.max_samples} samples")
        model.check_search(options)  # what the model's engine cannot decode: 422
        combine = None  # split_sentences: each text's sentences' translations -> its translation
        if req.split_sentences:
            if req.prefix is not None:
                raise ServeError(422, "split_sentences and prefix: a prefix starts a text, not its sentences")
            sentences, combine = split_texts(sentences, model.src_lang)
        cost = sum(server.check_sentence(model, s, i) for i, s in enumerate(sentences))
        prefix = _prefix(req.prefix, sentences, limits)
        call = Call.of(model.name, "translate", options=options, prefix=prefix)
        # beam search: continuous batching where the model can. A prefix is checked against each
        # sentence's length limit as it decodes: alone, one too long fails this request only (422).
        # sampled requests alone too: the seed draws this request's samples, whatever else is asked
        alone = prefix is not None or options.sample
        results = await server.run_job(call, sentences, cost, alone=alone) if sentences or not combine else []
        if combine is not None:
            results = combine(results)
        # Built here and returned as is: the response model only documents it (validating our own
        # output again cost ~0.1 ms of the event loop's time per request).
        return JSONResponse(
            {
                "model": model.name,
                "translations": [
                    {"text": r.text, "score": r.score, "nbest": [{"text": t, "score": s} for t, s in r.nbest]}
                    for r in results
                ],
            }
        )

    @app.post("/v1/attention", summary="every attention map of one translation, with words and an alignment")
    async def attention(req: AttentionRequest) -> dict[str, Any]:
        model: TranslationModel = server.resolve(req.model, "attention")
        server.check_beam(req.beam)
        if not req.text.strip():
            raise ServeError(422, "text is empty: there is no attention to show")
        cost = server.check_sentence(model, req.text, 0)
        (payload,) = await server.run_job(
            Call.of(model.name, "attention", beam=req.beam, flow=req.flow), [req.text], cost, alone=True
        )
        return {"model": model.name, **payload}


def _prefix(prefix: str | list[str] | None, sentences: list[str], limits: Limits) -> str | tuple | None:
    """A request's prefix as its Call carries it: one str for every sentence, a tuple with one per
    sentence (when they differ), or None (none, or only empty ones)."""
    if prefix is None:
        return None
    texts = [prefix] if isinstance(prefix, str) else prefix
    if not isinstance(prefix, str) and len(prefix) != len(sentences):
        raise ServeError(
            422,
            f"prefix has {len(prefix)} items for {len(sentences)} sentences: "
            "give one per sentence, or one string for all",
        )
    for i, text in enumerate(texts):
        if len(text) > limits.max_chars:
            raise ServeError(413, f"prefix {i} has {len(text)} characters; the limit is {limits.max_chars}")
    if len(set(texts)) == 1:
        return texts[0] or None
    return tuple(texts)
