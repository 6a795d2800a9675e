"""What the server answers for an error: JSON ``{"error": "one line"}`` and a status, from one map
of exceptions to (status, line) that the exception handlers and a stream's ``error`` event share.
No line names a path or an exception's text: those go to the server's stderr.

A path that speaks another API's dialect (OpenAI's ``/v1/completions``) registers a :data:`Shape`
in the server's ``error_shapes``: the same status and line, in the body (and status) its clients
parse."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import AttnkitError
from ..plugin.http import ServeError, describe
from .worker import DecodingLost

# (status, line) -> (status, body): how a path's clients are told of an error
Shape = Callable[[int, str], tuple[int, dict[str, Any]]]


def plain(status: int, line: str) -> tuple[int, dict[str, Any]]:
    """attnkit's own error body: ``{"error": "one line"}``."""
    return status, {"error": line}


def status_and_line(e: Exception, where: str) -> tuple[int, str]:
    """The status and line that answer ``e``, raised while serving ``where`` (a path, for the log)."""
    if isinstance(e, ServeError):
        return e.status, e.message
    if isinstance(e, AttnkitError):  # a ConfigError answers 422, as the command line exits 2
        return 422, str(e)
    if isinstance(e, DecodingLost):
        return 500, str(e)
    # Its text may name paths or internals: the operator reads it on stderr, the client a line.
    print(f"attnkit serve: internal error in {where}:", file=sys.stderr)
    traceback.print_exception(e, file=sys.stderr)
    return 500, f"internal error ({type(e).__name__}); the server's log has the details"


def add_error_handlers(app: FastAPI, shapes: Mapping[str, Shape]) -> None:
    """Every error answered as its path's :data:`Shape` says (``shapes``; :func:`plain` elsewhere)."""

    def answer(request: Request, status: int, line: str, headers: Any = None) -> JSONResponse:
        status, body = shapes.get(request.url.path, plain)(status, line)
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        errs = e.errors()
        bad_json = [x for x in errs if x.get("type") == "json_invalid"]
        if bad_json:
            reason = (bad_json[0].get("ctx") or {}).get("error", "invalid JSON")
            return answer(request, 400, f"the body is not valid JSON: {reason}")
        if "json" not in request.headers.get("content-type", "") and any(
            x.get("loc") == ("body",) for x in errs
        ):
            return answer(request, 400, "the body must be JSON, sent with Content-Type: application/json")
        return answer(request, 422, "; ".join(describe(x) for x in errs[:5]))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        message = e.detail if isinstance(e.detail, str) else str(e.detail)
        if e.status_code == 404:
            message = f"no such path: {request.url.path}"
        return answer(request, e.status_code, message, e.headers)

    async def refused(request: Request, e: Exception) -> JSONResponse:
        status, line = status_and_line(e, request.url.path)
        headers = e.headers if isinstance(e, ServeError) else None  # a 429's Retry-After
        return answer(request, status, line, headers)

    # Each class by name: those answer as responses; Exception's handler (a bug) runs where Starlette
    # also logs the exception.
    for kind in (ServeError, AttnkitError, DecodingLost, Exception):
        app.add_exception_handler(kind, refused)
