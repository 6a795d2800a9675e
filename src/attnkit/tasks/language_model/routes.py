"""The language model's endpoints, added by the server to its app: ``POST /v1/generate``, whole or
streamed token by token, and OpenAI's completions (:mod:`.openai_api`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import Field

from ...decoding.sampling import seeded_generator
from ...plugin.http import Call, Request, Searched, ServeError
from . import SEARCH, openai_api
from .generator import LanguageModel


class GenerateRequest(Request, Searched):
    text: str = Field(description="the prompt (may be empty: generate from the start)")
    model: str | None = Field(
        None, description="a name from GET /v1/models; default: the first language model"
    )
    search = SEARCH  # this task's defaults
    search_aliases = {"nbest": ("num_samples",), "max_len_b": ("max_new_tokens", "max_tokens")}
    stream: bool = Field(
        False,
        description="answer as Server-Sent Events: a 'token' event per token as it is chosen, then a "
        "'result' event (this endpoint's answer), then 'data: [DONE]'; greedy or sampling, one continuation",
    )


# The answer of "stream": true, in the schema beside the JSON one: Server-Sent Events (serve/stream.py)
STREAMED = {
    "schema": {"type": "string"},
    "description": "with stream: true, Server-Sent Events: 'event: token' lines with {token, text}, then "
    "'event: result' with this endpoint's JSON answer, then 'data: [DONE]'; an error after the start is "
    "'event: error' with {error, status}",
}


def add_routes(app: FastAPI, server: Any) -> None:
    """``/v1/generate`` and OpenAI's (``server``: :class:`attnkit.serve.app.Server`)."""
    limits = server.limits
    openai_api.add_routes(app, server)

    @app.post(
        "/v1/generate",
        summary="continue a prompt (language-model checkpoints)",
        responses={200: {"content": {"text/event-stream": STREAMED}}},
    )
    async def generate(req: GenerateRequest) -> Any:
        model: LanguageModel = server.resolve(req.model, "generate")
        server.check_beam(req.beam)
        if req.nbest > limits.max_samples:
            raise ServeError(422, f"nbest {req.nbest} is over the limit of {limits.max_samples}")
        options = req.search_options()  # every option checked here, streamed or not: 422
        cost = server.check_sentence(model, req.text, 0) if req.text else 0
        if req.stream:
            _check_stream(req)
            call = Call.of(model.name, "generate_stream", options=options)
            return server.stream_job(call, [req.text], cost, lambda gens: _generations(model.name, gens[0]))
        call = Call.of(model.name, "generate", options=options)
        (gens,) = await server.run_job(call, [req.text], cost, alone=True)
        return _generations(model.name, gens)


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
