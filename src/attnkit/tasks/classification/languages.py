"""A classifier as a language identifier: LibreTranslate's ``POST /detect`` (``q``, as JSON or a
form; the languages most probable first, confidences in percent), and the detection that its
``/translate`` asks of when the source is ``auto`` (the server's ``services["detect_language"]``).

A served classifier is a language identifier when every label it has is a language code (two or
three lowercase letters), as one trained on the ``langid`` corpus has; the first such one answers.
Without one, ``/detect`` answers 404 with a line saying what is missing (and is not in the schema).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from pydantic import Field

from ...plugin.http import Call, Request, ServeError, body_schema, parse_body

_CODE = re.compile(r"[a-z]{2,3}")


class DetectBody(Request):
    q: str = Field(description="a text")
    api_key: str | None = Field(None, description="the API key, where no Authorization header carries it")


def identifiers(server: Any) -> list[Any]:
    """The served classifiers whose every label is a language code."""
    return [m for m in server.models if m.task == "classify" and all(_CODE.fullmatch(x) for x in m.labels)]


def add_routes(app: FastAPI, server: Any) -> None:
    """``/detect``, and the detection service (``server``: :class:`attnkit.serve.app.Server`)."""
    found = identifiers(server)

    async def detect(texts: list[str]) -> list[list[tuple[str, float]]]:
        """Each text's languages and their confidences in percent, most probable first."""
        if not found:
            raise ServeError(
                404, "no language identifier is served (a classifier whose labels are language codes)"
            )
        model = found[0]
        cost = sum(server.check_sentence(model, t, i) for i, t in enumerate(texts))
        results = await server.run_job(Call.of(model.name, "classify", top_k=len(model.labels)), texts, cost)
        return [[(code, round(100 * p, 1)) for code, p in r] for r in results]

    if found:
        server.services["detect_language"] = detect
    server.error_shapes["/detect"] = lambda status, line: (400 if status == 422 else status, {"error": line})
    server.body_key_paths.add("/detect")

    @app.post(
        "/detect",
        summary="LibreTranslate's language detection (a classifier whose labels are language codes)",
        openapi_extra=body_schema(DetectBody),
        include_in_schema=bool(found),
    )
    async def detect_language(request: HTTPRequest) -> list[dict[str, Any]]:
        body = parse_body(await request.body(), request.headers.get("content-type", ""), DetectBody)
        if not body.q.strip():
            raise ServeError(400, "q is empty: nothing to detect")
        (languages,) = await detect([body.q])
        return [{"language": code, "confidence": confidence} for code, confidence in languages]
