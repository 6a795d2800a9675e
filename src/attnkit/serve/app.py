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
import contextlib
import functools
import math
from collections.abc import Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, StreamingResponse

from ..page import render_page
from ..plugin import endpoint_task, task_named, tasks
from ..plugin.http import Call, ErrorResponse, Limits, ServeError
from ..plugin.served import ServedModel, ServesText
from .batcher import BATCHING, Batching
from .decoder import Decoder, DecoderUnavailable, ThreadDecoder
from .errors import Shape, add_error_handlers
from .guards import BodyLimit, HostCheck
from .keys import OPEN, KeyCheck, Quota
from .metrics import OPEN as WATCHED
from .metrics import Measure, Metrics, add_watch_routes
from .page import render_docs
from .stream import HEADERS, EventFeed, Events, Speaker, late, sse_events


class Server:
    """What a task's routes (its package's ``routes.add_routes``) ask of the app: the loaded models,
    the limits of a request, and the decoder that runs a :class:`~attnkit.plugin.http.Call`."""

    def __init__(self, models: list[ServedModel], limits: Limits, request_timeout: float, quota: Quota):
        self.models, self.limits, self.request_timeout = models, limits, request_timeout
        self.quota = quota  # what one client may hold at once (.keys)
        self.by_name = {m.name: m for m in models}
        self.running: Decoder | None = None  # the decoder while the app serves
        # What routes declare of their paths (another API's dialect): the error body its clients parse
        # (.errors), the paths answered without a key and those whose key may come in the body (.keys)
        self.error_shapes: dict[str, Shape] = {}
        self.open_paths: set[str] = set(OPEN) | set(WATCHED)
        self.body_key_paths: set[str] = set()
        # what one task's routes offer another's: "detect_language" (texts -> each one's languages and
        # confidences, from a served language identifier) for LibreTranslate's source "auto"
        self.services: dict[str, Callable[..., Any]] = {}
        self.in_flight = self.source_tokens = 0  # handed to the decoding: not answered yet, ever (.metrics)

    def resolve(self, name: str | None, endpoint: str) -> Any:
        """The model a request names (or the endpoint's default), checked against the endpoint's task."""
        task = endpoint_task(endpoint)
        if name is None:
            fit = [m for m in self.models if m.task == task.name]
            if not fit:
                loaded = ", ".join(f"{m.name} ({m.task})" for m in self.models)
                raise ServeError(
                    422,
                    f"no loaded model serves /v1/{endpoint} (it needs {task.noun}; loaded: {loaded})",
                )
            return fit[0]
        if name not in self.by_name:
            raise ServeError(404, f"unknown model {name!r} (loaded: {', '.join(self.by_name)})")
        model = self.by_name[name]
        if model.task != task.name:
            raise ServeError(
                422, f"model {name!r} is {task_named(model.task).noun}; /v1/{endpoint} needs {task.noun}"
            )
        return model

    def check_beam(self, beam: int) -> None:
        if beam > self.limits.max_beam:
            raise ServeError(422, f"beam {beam} is over the limit of {self.limits.max_beam}")

    def check_sentence(self, model: ServesText, text: str, i: int) -> int:
        """The sentence's subword count, after checking it against the limits (a model without
        ``max_src_tokens`` reads a prefix of a longer text)."""
        limits = self.limits
        if len(text) > limits.max_chars:
            raise ServeError(413, f"sentence {i} has {len(text)} characters; the limit is {limits.max_chars}")
        n = model.count_tokens(text)
        most = getattr(model, "max_src_tokens", n)
        if n > most:
            raise ServeError(
                422, f"sentence {i} has {n} subword tokens; model {model.name!r} takes at most {most}"
            )
        return n

    async def run_job(self, call: Call, items: list, cost: int, *, alone: bool = False) -> list:
        """``call`` over ``items``, batched with other requests' (``alone``: not), within the deadline."""
        running = self.running
        if running is None:
            raise ServeError(503, "the server is starting or stopping")
        with self.quota.holding(cost):  # a 429 before anything is queued
            try:
                future = running.submit(call, items, cost, alone=alone)
            except DecoderUnavailable as e:
                raise ServeError(503, str(e)) from None
            self.in_flight, self.source_tokens = self.in_flight + 1, self.source_tokens + cost
            try:
                return await asyncio.wait_for(asyncio.wrap_future(future), self.request_timeout)
            except asyncio.TimeoutError:  # TimeoutError since Python 3.11, not yet in 3.10
                running.expire(future, self.request_timeout)
                raise ServeError(504, late(self.request_timeout)) from None
            finally:
                self.in_flight -= 1

    def stream_job(
        self, call: Call, items: list, cost: int, answer: Callable[[Any], dict[str, Any]] | Speaker
    ) -> StreamingResponse:
        """Decode ``call`` alone, its events sent as Server-Sent Events as they come (:mod:`.stream`):
        attnkit's own, ending with ``answer(result)``, or as a :class:`~.stream.Speaker` says them."""
        if self.running is None:
            raise ServeError(503, "the server is starting or stopping")
        decoder, feed = self.running, EventFeed(asyncio.get_running_loop())
        give_back = self.quota.take(cost)  # a 429 before anything is queued
        try:
            future = decoder.submit(call, items, cost, alone=True, on_event=feed.put)
        except DecoderUnavailable as e:
            give_back()
            raise ServeError(503, str(e)) from None
        loop = asyncio.get_running_loop()
        self.in_flight, self.source_tokens = self.in_flight + 1, self.source_tokens + cost

        def done() -> None:
            give_back()
            self.in_flight -= 1

        def release(_) -> None:  # decoded, failed or cancelled: counted back on the server's loop
            with contextlib.suppress(RuntimeError):  # the loop closed first (shutdown): nothing to count
                loop.call_soon_threadsafe(done)

        future.add_done_callback(release)
        feed.watch(future)
        events = sse_events(
            feed,
            future,
            speaker=Events(answer) if callable(answer) else answer,
            cancel=lambda: decoder.cancel(future),
            expire=lambda: decoder.expire(future, self.request_timeout),
            timeout_s=self.request_timeout,
        )
        return StreamingResponse(events, media_type="text/event-stream", headers=HEADERS)


def create_app(
    models: list[ServedModel],
    *,
    batching: Batching = BATCHING,
    limits: Limits | None = None,
    decoder: Decoder | None = None,
    request_timeout: float = 120.0,
    allowed_hosts: Iterable[str] | None = None,
    api_keys: tuple[bytes, ...] = (),
    quota: Quota | None = None,
    say: Callable[[str], None] | None = None,
) -> FastAPI:
    """An app serving ``models`` (the first of each task is that task's default), batched as
    ``batching`` says (:class:`~.batcher.Batching`). With a started ``decoder`` (a
    :class:`~.decoder.ProcessDecoder`, built with the same ``batching``), the models run in its process and
    ``models`` only answer the questions asked before decoding (names, tasks, limits, token counts);
    without, they run on a thread of this process. The app closes the decoder when it shuts down.

    A request not decoded within ``request_timeout`` seconds answers 504 (and a decoding process that
    answered nothing for as long is killed and restarted). ``allowed_hosts``: the names the ``Host``
    header may carry (:func:`allowed_host_names`); None accepts any (tests, a caller behind a proxy).
    ``api_keys``: the keys a request must bear (:mod:`.keys`); none: anyone who reaches it may ask.
    ``quota``: what one client (a key; without keys, all requests together) may hold at once.
    ``say``: where the shutdown is announced (the command's stderr). Each registered task adds its
    endpoints (its package's ``routes.add_routes``)."""
    if request_timeout <= 0:
        raise ValueError(f"request_timeout must be positive, got {request_timeout}")
    server = Server(models, limits or Limits(), request_timeout, quota or Quota())
    lifespan = _lifespan(server, lambda: decoder or ThreadDecoder(models, batching), say)
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse} for code in (400, 404, 413, 422, 429, *((401,) if api_keys else ()))
    }
    app = FastAPI(
        title="attnkit", version="1", lifespan=lifespan, responses=errors, docs_url=None, redoc_url=None
    )
    app.add_middleware(BodyLimit, max_bytes=server.limits.max_body_bytes, read_timeout=request_timeout)
    # added after the body limit, so it runs before it: no key, no body read
    app.add_middleware(KeyCheck, keys=api_keys, server=server)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed=frozenset(allowed_hosts))
    add_error_handlers(app, server.error_shapes)
    metrics = Metrics(server)
    paths = functools.cache(lambda: frozenset(getattr(r, "path", "") for r in app.routes))
    app.add_middleware(Measure, metrics=metrics, paths=paths)  # the last added runs first: every answer
    _add_core_routes(app, server)
    add_watch_routes(app, server, metrics)
    for task in tasks():
        routes = task.part("routes") if task.endpoints else None
        if routes is not None:
            routes.add_routes(app, server)
    _state_what_is_served(app, server)
    return app


def _lifespan(server: Server, start: Callable[[], Decoder], say: Callable[[str], None] | None):
    """The app's life: the decoder started when it starts; at its end, what is queued finished and
    the decoder closed (a decoding process not done within the bound is killed), announced."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        started = server.running = app.state.decoder = start()
        try:
            yield
        finally:  # uvicorn has let in-flight requests finish (each within its deadline)
            bound = min(server.request_timeout, CLOSE_TIMEOUT_S)
            if say:
                say(f"stopping: finishing what is queued (at most {bound:.0f}s)")
            await asyncio.to_thread(started.close, bound)
            if say:
                say("stopped")

    return lifespan


def _state_what_is_served(app: FastAPI, server: Server) -> None:
    """The OpenAPI schema says what this server takes: its limits where they are tighter than the
    options' declared bounds (a beam up to ``max_beam``, not 256), the names its ``model`` fields take,
    and only the endpoints a loaded model serves (another answers 422, naming what it needs). A
    request the schema calls valid is taken."""
    limits = server.limits
    caps = {"beam": limits.max_beam, "nbest": min(limits.max_beam, limits.max_samples)}
    caps["n"] = limits.max_samples  # OpenAI's nbest
    served = {m.task for m in server.models}
    unserved = {f"/v1/{e}" for t in tasks() if t.name not in served for e in t.endpoints}
    build = app.openapi

    def cap(prop: dict[str, Any], limit: int) -> None:
        if prop.get("maximum", math.inf) > limit:
            prop["maximum"] = limit

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = build()
            for schema in spec.get("components", {}).get("schemas", {}).values():
                for name, limit in caps.items():
                    if name in schema.get("properties", {}):
                        cap(schema["properties"][name], limit)
            for path in spec.get("paths", {}).values():  # query fields (/v1/caption)
                for parameter in path.get("post", {}).get("parameters", []):
                    if parameter.get("name") in caps:
                        cap(parameter.setdefault("schema", {}), caps[parameter["name"]])
            _name_the_models(spec, server)
            for path in unserved:
                spec.get("paths", {}).pop(path, None)
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _name_the_models(spec: dict[str, Any], server: Server) -> None:
    """Each endpoint's ``model`` field (body or query) lists the loaded models that serve it; null
    stays the endpoint's default model."""
    schemas = spec.get("components", {}).get("schemas", {})
    for path, methods in spec.get("paths", {}).items():
        task = next((t for t in tasks() if path.removeprefix("/v1/") in t.endpoints), None)
        if task is None:
            continue
        names = [m.name for m in server.models if m.task == task.name]
        for op in methods.values():
            fields = [p.setdefault("schema", {}) for p in op.get("parameters", []) if p["name"] == "model"]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            in_body = schemas.get(body.get("$ref", "").split("/")[-1], {}).get("properties", {}).get("model")
            for field in fields + ([in_body] if in_body else []):
                field["anyOf"] = [{"type": "string", "enum": names}, {"type": "null"}]


def _add_core_routes(app: FastAPI, server: Server) -> None:
    """The page, its docs and the model list: every task's (what watches the server: .metrics)."""

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(render_page())

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(render_docs())

    @app.get("/v1/models", summary="the loaded models, their tasks and limits")
    async def list_models() -> dict[str, Any]:
        """``models``: attnkit's description of each; ``object`` and ``data``: the same list in
        OpenAI's shape, which its clients read (``client.models.list()``)."""
        running = server.running
        models = running.describe() if running else [m.describe() for m in server.models]
        listed = [
            {"id": m.name, "object": "model", "created": 0, "owned_by": "attnkit"} for m in server.models
        ]
        return {"object": "list", "data": listed, "models": models}


CLOSE_TIMEOUT_S = 10.0  # at shutdown, how long decoding processes may take to finish what is queued
