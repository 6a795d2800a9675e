"""The FastAPI application: JSON API under /v1, the attention page at /, OpenAPI at /openapi.json
and a plain page of it at /docs (no CDN: nothing is fetched from elsewhere).

Every error is JSON ``{"error": "one line naming the problem"}``: 400 body not JSON or a ``Host``
the server does not answer to (DNS rebinding), 404 unknown model or path, 413 body over the size
limit, 422 a wrong type, an unknown field or a value out of range (too many sentences, a sentence over
the length limit, nbest above beam, a model of the wrong task), 503 no decoding process up, 504 a
request past its deadline. A bug in a request answers 500 and the server lives on; no answer names a
path or an exception's text (those go to the server's stderr). A streamed ``/v1/generate`` answers
these before its stream begins, and an ``error`` event after (:mod:`.stream`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse

from ..decoding.sampling import seeded_generator
from ..tasks import task_named
from .decoder import Call, DecoderUnavailable, ProcessDecoder, ThreadDecoder
from .errors import ServeError, add_error_handlers
from .guards import BodyLimit, HostCheck
from .page import render_docs, render_page
from .schemas import (
    AttentionRequest,
    CaptionQuery,
    ClassifyRequest,
    ErrorResponse,
    GenerateRequest,
    Limits,
    TranslateRequest,
    TranslateResponse,
)
from .stream import HEADERS, EventFeed, late, sse_events
from .tasks import (
    CaptionerServed,
    ClassifierServed,
    LanguageModelServed,
    ServedModel,
    TranslationModel,
    endpoint_task,
)


def create_app(
    models: list[ServedModel],
    *,
    max_batch_tokens: int = 4000,
    max_wait_ms: float = 5.0,
    max_gap_ms: float | None = 1.0,
    join_group: int = 4,
    join_wait_steps: int = 4,
    limits: Limits | None = None,
    decoder: ProcessDecoder | None = None,
    request_timeout: float = 120.0,
    allowed_hosts: Iterable[str] | None = None,
) -> FastAPI:
    """An app serving ``models`` (the first of each task is that task's default); the batching
    options are :class:`~.batcher.Batcher`'s. With a started ``decoder`` (a
    :class:`~.decoder.ProcessDecoder`, built with the same options), the models run in its process and
    ``models`` only answer the questions asked before decoding (names, tasks, limits, token counts);
    without, they run on a thread of this process. The app closes the decoder when it shuts down.

    A request not decoded within ``request_timeout`` seconds answers 504 (and a decoding process that
    answered nothing for as long is killed and restarted). ``allowed_hosts``: the names the ``Host``
    header may carry (:func:`allowed_host_names`); None accepts any (tests, a caller behind a proxy)."""
    if request_timeout <= 0:
        raise ValueError(f"request_timeout must be positive, got {request_timeout}")
    limits = limits or Limits()
    by_name = {m.name: m for m in models}
    given = decoder
    running: ProcessDecoder | ThreadDecoder | None = None  # the decoder while the app serves

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        nonlocal running
        started = running = app.state.decoder = given or ThreadDecoder(
            models,
            max_batch_tokens=max_batch_tokens,
            max_wait_ms=max_wait_ms,
            max_gap_ms=max_gap_ms,
            join_group=join_group,
            join_wait_steps=join_wait_steps,
        )
        try:
            yield
        finally:  # uvicorn has let in-flight requests finish (each within its deadline); finish what
            # is queued, then stop: a decoding process not done within the bound is killed
            await asyncio.to_thread(started.close, min(request_timeout, CLOSE_TIMEOUT_S))

    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse} for code in (400, 404, 413, 422)
    }
    app = FastAPI(
        title="attnkit", version="1", lifespan=lifespan, responses=errors, docs_url=None, redoc_url=None
    )
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed=frozenset(allowed_hosts))
    add_error_handlers(app)

    def resolve(name: str | None, endpoint: str) -> Any:
        """The model a request names (or the endpoint's default), checked against the endpoint's task."""
        task = endpoint_task(endpoint)
        if name is None:
            fit = [m for m in models if m.task == task.name]
            if not fit:
                loaded = ", ".join(f"{m.name} ({m.task})" for m in models)
                raise ServeError(
                    422,
                    f"no loaded model serves /v1/{endpoint} (it needs {task.noun}; loaded: {loaded})",
                )
            return fit[0]
        if name not in by_name:
            raise ServeError(404, f"unknown model {name!r} (loaded: {', '.join(by_name)})")
        model = by_name[name]
        if model.task != task.name:
            raise ServeError(
                422, f"model {name!r} is {task_named(model.task).noun}; /v1/{endpoint} needs {task.noun}"
            )
        return model

    async def run_job(call: Call, items: list, cost: int, *, alone: bool = False) -> list:
        if running is None:
            raise ServeError(503, "the server is starting or stopping")
        try:
            future = running.submit(call, items, cost, alone=alone)
        except DecoderUnavailable as e:
            raise ServeError(503, str(e)) from None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), request_timeout)
        except asyncio.TimeoutError:  # TimeoutError since Python 3.11, not yet in 3.10
            running.expire(future, request_timeout)
            raise ServeError(504, late(request_timeout)) from None

    def stream_job(call: Call, items: list, cost: int, answer: Any) -> StreamingResponse:
        """Decode ``call`` alone, its events sent as Server-Sent Events as they come (:mod:`.stream`)."""
        if running is None:
            raise ServeError(503, "the server is starting or stopping")
        decoder, feed = running, EventFeed(asyncio.get_running_loop())
        try:
            future = decoder.submit(call, items, cost, alone=True, on_event=feed.put)
        except DecoderUnavailable as e:
            raise ServeError(503, str(e)) from None
        feed.watch(future)
        events = sse_events(
            feed,
            future,
            answer=answer,
            cancel=lambda: decoder.cancel(future),
            expire=lambda: decoder.expire(future, request_timeout),
            timeout_s=request_timeout,
        )
        return StreamingResponse(events, media_type="text/event-stream", headers=HEADERS)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(render_page())

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(render_docs())

    @app.get("/health", summary="liveness and batching counters")
    async def health() -> JSONResponse:
        """200 while requests can be decoded; 503 while they cannot ("unavailable": a decoding
        process is restarting) or never will again ("failed": the server needs a restart)."""
        stats = running.stats if running else None
        down = running.down if running else "the server is starting or stopping"
        failed = running.failed if running else None
        status = f"failed: {failed}" if failed else "ok" if down is None else f"unavailable: {down}"
        body = {
            "status": status,
            "models": list(by_name),
            "model_calls": stats.model_calls if stats else 0,
            "decode_steps": stats.decode_steps if stats else 0,
            "requests_batched": stats.jobs if stats else 0,
            "requests_cancelled": stats.cancelled if stats else 0,  # given up on (clients gone, deadlines)
            "workers": running.worker_count if running else 0,  # decoding workers, and how many serve now
            "workers_up": running.workers_up if running else 0,
        }
        return JSONResponse(body, status_code=200 if status == "ok" else 503)

    @app.get("/v1/models", summary="the loaded models, their tasks and limits")
    async def list_models() -> dict[str, Any]:
        return {"models": running.describe() if running else [m.describe() for m in models]}

    @app.post("/v1/translate", response_model=TranslateResponse, summary="translate one or more sentences")
    async def translate(req: TranslateRequest) -> JSONResponse:
        model: TranslationModel = resolve(req.model, "translate")
        sentences = [req.text] if isinstance(req.text, str) else req.text
        if len(sentences) > limits.max_sentences:
            raise ServeError(
                413, f"too many sentences: {len(sentences)} (the limit is {limits.max_sentences} per request)"
            )
        if req.beam > limits.max_beam:
            raise ServeError(422, f"beam {req.beam} is over the limit of {limits.max_beam}")
        options = req.search_options()  # a ConfigError answers 422, as the command line exits 2
        if options.sample and options.nbest > limits.max_samples:
            raise ServeError(422, f"nbest {options.nbest} is over the limit of {limits.max_samples} samples")
        model.check_search(options)  # what the model's engine cannot decode: 422
        cost = sum(_check_sentence(model, s, i, limits) for i, s in enumerate(sentences))
        prefix = _prefix(req.prefix, sentences, limits)
        call = Call.of(model.name, "translate", options=options, prefix=prefix)
        # beam search: continuous batching where the model can. A prefix is checked against each
        # sentence's length limit as it decodes: alone, one too long fails this request only (422).
        # sampled requests alone too: the seed draws this request's samples, whatever else is asked
        results = await run_job(call, sentences, cost, alone=prefix is not None or options.sample)
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
        model: TranslationModel = resolve(req.model, "attention")
        if req.beam > limits.max_beam:
            raise ServeError(422, f"beam {req.beam} is over the limit of {limits.max_beam}")
        if not req.text.strip():
            raise ServeError(422, "text is empty: there is no attention to show")
        cost = _check_sentence(model, req.text, 0, limits)
        (payload,) = await run_job(
            Call.of(model.name, "attention", beam=req.beam), [req.text], cost, alone=True
        )
        return {"model": model.name, **payload}

    @app.post("/v1/generate", summary="continue a prompt (language-model checkpoints)")
    async def generate(req: GenerateRequest) -> Any:
        model: LanguageModelServed = resolve(req.model, "generate")
        if req.beam > limits.max_beam:
            raise ServeError(422, f"beam {req.beam} is over the limit of {limits.max_beam}")
        if req.nbest > limits.max_samples:
            raise ServeError(422, f"nbest {req.nbest} is over the limit of {limits.max_samples}")
        options = req.search_options()  # every option checked here, streamed or not: 422
        cost = _check_sentence(model, req.text, 0, limits) if req.text else 0
        if req.stream:
            _check_stream(req)
            call = Call.of(model.name, "generate_stream", options=options)
            return stream_job(call, [req.text], cost, lambda gens: _generations(model.name, gens[0]))
        call = Call.of(model.name, "generate", options=options)
        (gens,) = await run_job(call, [req.text], cost, alone=True)
        return _generations(model.name, gens)

    @app.post("/v1/classify", summary="label texts (classifier checkpoints)")
    async def classify(req: ClassifyRequest) -> dict[str, Any]:
        model: ClassifierServed = resolve(req.model, "classify")
        texts = [req.text] if isinstance(req.text, str) else req.text
        if len(texts) > limits.max_sentences:
            raise ServeError(
                413, f"too many texts: {len(texts)} (the limit is {limits.max_sentences} per request)"
            )
        n_labels = len(model.classifier.labels)
        if req.top_k > n_labels:
            raise ServeError(
                422, f"top_k {req.top_k} is larger than the {n_labels} labels of model {model.name!r}"
            )
        for i, text in enumerate(texts):
            if not text.strip():
                raise ServeError(422, f"text {i} is empty: nothing to classify")
        cost = sum(_check_sentence(model, t, i, limits) for i, t in enumerate(texts))
        results = await run_job(Call.of(model.name, "classify", top_k=req.top_k), texts, cost)
        return {
            "model": model.name,
            "results": [{"labels": [{"label": a, "probability": p} for a, p in r]} for r in results],
        }

    @app.post(
        "/v1/caption",
        summary="caption an image (captioner checkpoints): the body is the image file's bytes",
    )
    async def caption(request: Request, query: Annotated[CaptionQuery, Query()]) -> dict[str, Any]:
        """``curl --data-binary @photo.png -H 'Content-Type: image/png' 'HOST/v1/caption?beam=4'``; a body
        that is no image, too large an image or one of an unreadable pixel mode answers 4xx."""
        served: CaptionerServed = resolve(query.model, "caption")
        if query.beam > limits.max_beam:
            raise ServeError(422, f"beam {query.beam} is over the limit of {limits.max_beam}")
        options = query.search_options()  # a ConfigError answers 422
        if options.sample and options.nbest > limits.max_samples:
            raise ServeError(422, f"nbest {options.nbest} is over the limit of {limits.max_samples} samples")
        image = await request.body()
        if not image:
            raise ServeError(
                422, "the body is empty: send the image file's bytes (e.g. curl --data-binary @x.png)"
            )
        served.check(image)  # a bad image: one line, 422, before any decoding
        call = Call.of(served.name, "caption", options=options, attention=query.attention)
        (answer,) = await run_job(call, [image], served.regions, alone=query.attention or options.sample)
        return {"model": served.name, **answer}

    return app


def _generations(name: str, gens: list) -> dict[str, Any]:
    """The answer of ``/v1/generate`` (and the ``result`` event of a streamed one)."""
    return {
        "model": name,
        "generations": [{"text": g.text, "continuation": g.continuation, "score": g.score} for g in gens],
    }


def _check_stream(req: GenerateRequest) -> None:
    """A stream sends one continuation's tokens as they are chosen: greedy search or sampling."""
    if req.nbest != 1:
        raise ServeError(422, f"stream gives one continuation: nbest must be 1, got {req.nbest}")
    if req.beam != 1 and not req.sample:
        raise ServeError(
            422,
            f"stream needs greedy search (beam 1) or sample: beam {req.beam} settles its tokens at the end",
        )
    if req.sample:
        seeded_generator(req.seed)  # a seed torch cannot take: 422 now, not an error event later


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


def _check_sentence(model, text: str, i: int, limits: Limits) -> int:
    """The sentence's subword count, after checking it against the limits (a model without
    ``max_src_tokens`` reads a prefix of a longer text)."""
    if len(text) > limits.max_chars:
        raise ServeError(413, f"sentence {i} has {len(text)} characters; the limit is {limits.max_chars}")
    n = model.count_tokens(text)
    if n > getattr(model, "max_src_tokens", n):
        raise ServeError(
            422,
            f"sentence {i} has {n} subword tokens; model {model.name!r} takes at most {model.max_src_tokens}",
        )
    return n


CLOSE_TIMEOUT_S = 10.0  # at shutdown, how long decoding processes may take to finish what is queued
