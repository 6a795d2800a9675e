"""What an operator watches the server with: ``GET /metrics`` in Prometheus' text format (through
``prometheus_client``) and ``GET /ready``, true only when every model can answer.

Metrics, each prefixed ``attnkit_``:

- ``requests_total{endpoint, status}`` and ``request_seconds{endpoint}`` (a histogram, from the
  request's arrival to its answer's last byte, a stream's last event included). ``endpoint`` is the
  route's path; a path the server does not have counts as ``other``, so a scanner cannot grow the
  series without bound.
- ``requests_in_flight``: requests handed to the decoding and not answered yet (the queue's depth).
- ``source_tokens_total``: the source tokens of what was handed to the decoding (its rate is tokens/s).
- ``decode_steps_total`` and ``decode_step_rows_total``: steps of the running searches and the rows
  they decoded (the second's rate over the first's: rows per step, what decides throughput);
  ``model_calls_total``, ``sentences_total``, ``requests_cancelled_total``.
- ``workers``, ``workers_up`` and ``worker_restarts_total``: the decoding workers.

Every app has its own registry (tests start many apps in one process). Like ``/health``, both
endpoints answer without an API key: a probe or a scraper holds none, and they say nothing of a
request's text.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

OPEN = ("/metrics", "/ready")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus' text format
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    """The registry of one app: the request counters the middleware updates, and what the server's
    decoder counts, read when scraped."""

    def __init__(self, server: Any):  # server: attnkit.serve.app.Server
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "attnkit_requests", "requests answered", ("endpoint", "status"), registry=self.registry
        )
        self.seconds = Histogram(
            "attnkit_request_seconds",
            "time to answer",
            ("endpoint",),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Decoding(server))


class _Decoding:
    """The decoder's counters as metrics, read at each scrape (a prometheus_client collector)."""

    def __init__(self, server: Any):
        self.server = server

    def describe(self) -> list:
        return []  # read at scrape time: nothing to declare ahead

    def collect(self):
        server, running = self.server, self.server.running
        stats = running.stats if running else None
        counters = {
            "source_tokens": ("source tokens handed to the decoding", server.source_tokens),
            "decode_steps": ("steps of the running searches", stats.decode_steps if stats else 0),
            "decode_step_rows": ("rows those steps decoded", stats.step_rows if stats else 0),
            "model_calls": ("batched model calls", stats.model_calls if stats else 0),
            "sentences": ("sentences (items) answered", stats.items if stats else 0),
            "requests_cancelled": ("requests given up on", stats.cancelled if stats else 0),
            "worker_restarts": ("decoding processes restarted", running.restarts if running else 0),
        }
        for name, (doc, value) in counters.items():
            yield CounterMetricFamily(f"attnkit_{name}", doc, value=value)
        gauges = {
            "requests_in_flight": ("requests decoding or waiting to", server.in_flight),
            "workers": ("decoding workers", running.worker_count if running else 0),
            "workers_up": ("decoding workers serving now", running.workers_up if running else 0),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(f"attnkit_{name}", doc, value=value)


class Measure:
    """ASGI middleware, outermost: every answer counted and timed by its route's path (401s, 413s
    and 429s of the guards included)."""

    def __init__(self, app, *, metrics: Metrics, paths: Any):  # paths: () -> the routes' paths
        self.app, self.metrics, self.paths = app, metrics, paths

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500  # no answer begun: a bug (Starlette answers 500)

        async def watched(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            endpoint = scope["path"] if scope["path"] in self.paths() else "other"
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.seconds.labels(endpoint).observe(time.perf_counter() - start)


def add_watch_routes(app: FastAPI, server: Any, metrics: Metrics) -> None:
    """``/health`` (liveness), ``/ready`` (readiness) and ``/metrics``."""

    @app.get("/health", summary="liveness and batching counters")
    async def health() -> JSONResponse:
        """200 while requests can be decoded; 503 while they cannot ("unavailable": a decoding
        process is restarting) or never will again ("failed": the server needs a restart)."""
        running = server.running
        stats = running.stats if running else None
        down = running.down if running else "the server is starting or stopping"
        failed = running.failed if running else None
        status = f"failed: {failed}" if failed else "ok" if down is None else f"unavailable: {down}"
        body = {
            "status": status,
            "models": list(server.by_name),
            "model_calls": stats.model_calls if stats else 0,
            "decode_steps": stats.decode_steps if stats else 0,
            "requests_batched": stats.jobs if stats else 0,
            "requests_cancelled": stats.cancelled if stats else 0,  # given up on (clients gone, deadlines)
            "workers": running.worker_count if running else 0,  # decoding workers, and how many serve now
            "workers_up": running.workers_up if running else 0,
        }
        return JSONResponse(body, status_code=200 if status == "ok" else 503)

    @app.get("/ready", summary="readiness: every model can answer now")
    async def ready() -> JSONResponse:
        """200 only when every decoding worker is up (a load balancer sends requests then); 503
        while one is starting or restarting, or the server is starting or stopping."""
        running = server.running
        if running is None:
            why = "the server is starting or stopping"
        elif running.failed or running.workers_up < running.worker_count:
            why = running.failed or f"{running.workers_up} of {running.worker_count} decoding workers are up"
        else:
            return JSONResponse({"status": "ready", "models": list(server.by_name)})
        return JSONResponse({"status": f"not ready: {why}"}, status_code=503)

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE)
