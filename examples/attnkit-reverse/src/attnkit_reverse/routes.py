"""``POST /v1/reverse``: ``{"text": "a b c"}`` -> ``{"model": ..., "reversed": "c b a"}``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import Field

from attnkit.plugin.http import Call, Request


class ReverseRequest(Request):
    text: str = Field(description="letters separated by spaces")
    model: str | None = Field(None, description="a name from GET /v1/models; default: the first one")


def add_routes(app: FastAPI, server: Any) -> None:
    @app.post("/v1/reverse", summary="reverse a sequence of letters (reversal checkpoints)")
    async def reverse(req: ReverseRequest) -> dict[str, Any]:
        model = server.resolve(req.model, "reverse")
        cost = server.check_sentence(model, req.text, 0)
        (answer,) = await server.run_job(Call.of(model.name, "reverse"), [req.text], cost)
        return {"model": model.name, "reversed": answer}
