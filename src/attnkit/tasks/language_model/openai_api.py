"""OpenAI's API for the language model: ``POST /v1/completions`` and ``POST /v1/chat/completions``,
whole or streamed (``GET /v1/models`` is the server's own list, which answers in OpenAI's shape
too), so the ``openai`` client and the tools built on it talk to a served language model unchanged.

Each is a thin layer over ``/v1/generate``'s operations; the fields map onto its search:

- ``temperature`` (default 1, as OpenAI's): 0, or ``top_p`` 0, is greedy search; above, sampling
  at that temperature from the nucleus of mass ``top_p`` (default 1).
- ``n``: samples per prompt (so a temperature above 0); ``seed``: the sampler's seed (without one,
  each request draws its own, as OpenAI's differ from call to call).
- ``max_tokens`` (a chat's ``max_completion_tokens`` too): new tokens at most; a completion's default
  is 16, as OpenAI's, a chat's as many as the model's positions leave.
- ``stop``: up to 4 strings; the text ends before the first that appears (finish reason ``stop``).
- ``stream``: OpenAI's chunks, then ``data: [DONE]``; ``stream_options.include_usage``: a last
  chunk with the usage. ``echo`` (completions): the prompt before its completion.

A chat is one prompt: its messages' contents, one a line, in order; the model was trained on
plain text and knows no roles, so none are written. What OpenAI defines and attnkit cannot honour
(log-probabilities, logit biases, penalties, ``best_of`` other than ``n``, tools, a response format
other than text, a suffix) answers 400 naming the field, as does an unknown field; every error is
OpenAI's body (:func:`.openai_text.error_body`).
"""

from __future__ import annotations

import secrets
import time
import uuid
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from ...decoding.defaults import SEED_RANGE
from ...decoding.options import SearchOptions
from ...plugin.http import Call, Request, ServeError
from . import SEARCH
from .generator import LanguageModel
from .openai_text import Chunks, after_prompt, cut, error_body, finish_reason

PATHS = ("/v1/completions", "/v1/chat/completions")
Stop = str | list[str] | None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    include_usage: bool = False


class Sampled(Request):
    """The fields both endpoints share, with OpenAI's bounds."""

    model: str | None = Field(
        None, description="a name from GET /v1/models; default: the first language model"
    )
    max_tokens: int | None = Field(None, ge=1, description="new tokens at most")
    temperature: float | None = Field(None, ge=0, le=2, description="0: greedy; default 1")
    top_p: float | None = Field(None, ge=0, le=1, description="the nucleus' mass; default 1")
    n: int = Field(1, ge=1, le=128, description="choices per prompt (samples: temperature above 0)")
    seed: int | None = Field(None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    stop: Stop = Field(None, description="up to 4 strings that end the text where they appear")
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(None, description="the caller's own name for its user (not used)")
    # OpenAI's, taken at the values that change nothing; any other is a 400 naming the field
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: Any = None

    def unhonoured(self) -> list[str]:
        """The fields set to something attnkit cannot do."""
        off: dict[str, tuple[object, ...]] = {"presence_penalty": (None, 0), "frequency_penalty": (None, 0)}
        off |= {"logit_bias": (None, {}), "logprobs": (None, False, 0)}
        return [name for name, fine in off.items() if getattr(self, name) not in fine]


class CompletionRequest(Sampled):
    prompt: str | list[str] = Field(description="one prompt, or a list of prompts")
    echo: bool = Field(False, description="the prompt before its completion")
    best_of: int | None = None
    suffix: str | None = None

    def unhonoured(self) -> list[str]:
        bad = super().unhonoured()
        return (
            bad
            + (["best_of"] if self.best_of not in (None, self.n) else [])
            + (["suffix"] if self.suffix else [])
        )


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal["text"]
    text: str


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[Part]
    name: str | None = None

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatRequest(Sampled):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, description="max_tokens' newer name")
    response_format: dict[str, Any] | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None

    def unhonoured(self) -> list[str]:
        bad = super().unhonoured()
        if self.response_format not in (None, {"type": "text"}):
            bad.append("response_format")
        return bad + [
            name for name in ("tools", "tool_choice") if getattr(self, name) not in (None, [], "none")
        ]


def check(req: Sampled) -> tuple[str, ...]:
    """The request's stop sequences, after refusing what cannot be honoured (400 naming the field)."""
    if bad := req.unhonoured():
        raise ServeError(400, f"{bad[0]}: attnkit does not support it (leave it out)")
    stops = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    if len(stops) > 4 or any(not s for s in stops):
        raise ServeError(400, "stop: at most 4 strings, none empty")
    if req.stream_options is not None and not req.stream:
        raise ServeError(400, "stream_options: only with stream: true")
    if req.stream and req.n != 1:
        raise ServeError(400, f"n: a stream gives one choice, got {req.n}")
    return stops


def search(req: Sampled, max_new: int) -> SearchOptions:
    """The search the request asks for (module docstring): ``max_new`` tokens and the end of text's."""
    temperature = 1.0 if req.temperature is None else req.temperature
    top_p = 1.0 if req.top_p is None else req.top_p
    if temperature == 0 or top_p == 0:
        if req.n != 1:
            raise ServeError(400, f"n: greedy search (temperature 0) gives one choice, got {req.n}")
        return SearchOptions.of(SEARCH, beam=1, max_len_a=0.0, max_len_b=max_new + 1)
    seed = secrets.randbelow(2**31) if req.seed is None else req.seed
    return SearchOptions.of(
        SEARCH, beam=1, nbest=req.n, sample=True, temperature=temperature, top_p=top_p, top_k=0,
        seed=seed, max_len_a=0.0, max_len_b=max_new + 1,
    )  # fmt: skip


def add_routes(app: FastAPI, server: Any) -> None:
    """``/v1/completions`` and ``/v1/chat/completions`` (``server``: :class:`attnkit.serve.app.Server`)."""
    for path in PATHS:
        server.error_shapes[path] = error_body

    @app.post("/v1/completions", summary="OpenAI's completions (language-model checkpoints)")
    async def completions(req: CompletionRequest) -> Any:
        prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        if not prompts or len(prompts) > server.limits.max_sentences:
            raise ServeError(400, f"prompt: 1 to {server.limits.max_sentences} prompts, got {len(prompts)}")
        if req.stream and len(prompts) != 1:
            raise ServeError(400, f"prompt: a stream continues one prompt, got {len(prompts)}")
        return await _answer(server, req, "completions", prompts, 16)

    @app.post("/v1/chat/completions", summary="OpenAI's chat completions (language-model checkpoints)")
    async def chat(req: ChatRequest) -> Any:
        if (
            None not in (req.max_tokens, req.max_completion_tokens)
            and req.max_tokens != req.max_completion_tokens
        ):
            raise ServeError(400, "max_completion_tokens: differs from max_tokens (give one)")
        req.max_tokens = req.max_tokens or req.max_completion_tokens
        return await _answer(
            server, req, "chat/completions", ["\n".join(m.text() for m in req.messages)], None
        )


async def _answer(server: Any, req: Sampled, endpoint: str, prompts: list[str], max_new: int | None) -> Any:
    """Decode ``prompts`` as ``req`` asks, answered whole or as a stream of chunks."""
    model: LanguageModel = server.resolve(req.model, endpoint)
    stops = check(req)
    if req.n > server.limits.max_samples:
        raise ServeError(400, f"n: {req.n} is over the limit of {server.limits.max_samples}")
    options = search(req, req.max_tokens or max_new or model.max_src_tokens)
    ids = [model.tokenizer.encode(p, side="src") if p else [] for p in prompts]
    cost = sum(server.check_sentence(model, p, i) for i, p in enumerate(prompts) if p)
    limits = [model.limit(len(i), options) for i in ids]  # a prompt that fills the model: a 422 (400)
    chat = endpoint == "chat/completions"
    kind = "chat.completion" if chat else "text_completion"
    head: dict[str, Any] = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}", "object": kind}
    head |= {"created": int(time.time()), "model": model.name}
    usage = {"prompt_tokens": sum(len(i) for i in ids)}
    if req.stream:
        include = req.stream_options is not None and req.stream_options.include_usage
        chunks = Chunks(
            {**head, "object": f"{kind}.chunk"}, chat, model.tokenizer, [] if chat else ids[0], limits[0],
            stops, usage if include else None,
        )  # fmt: skip
        return server.stream_job(
            Call.of(model.name, "generate_stream", options=options), prompts, cost, chunks
        )
    results = await server.run_job(
        Call.of(model.name, "generate", options=options), prompts, cost, alone=True
    )
    choices: list[dict[str, Any]] = []
    for i, gens in enumerate(results):
        for g in gens:
            text, stopped = cut(after_prompt(model.tokenizer, [] if chat else ids[i], g.tokens), stops)
            choice: dict[str, Any] = {
                "index": len(choices),
                "finish_reason": finish_reason(g.tokens, limits[i], stopped),
            }
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice |= {
                    "text": prompts[i] + text if getattr(req, "echo", False) else text,
                    "logprobs": None,
                }
            choices.append(choice)
    done = sum(len(g.tokens) for gens in results for g in gens)
    usage |= {"completion_tokens": done, "total_tokens": usage["prompt_tokens"] + done}
    return {**head, "choices": choices, "usage": usage}
