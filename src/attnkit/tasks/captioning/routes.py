"""The captioner's endpoint: ``POST /v1/caption`` (the body is the image's bytes, the search its
query), added by the server to its app."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi import Request as HTTPRequest
from pydantic import ConfigDict, Field

from ...plugin.http import Call, Searched, ServeError
from . import SEARCH
from .captioner import Captioner


class CaptionQuery(Searched):
    """``/v1/caption``'s query (the body is the image): every field of SearchOptions, a captioner's
    defaults. Not strict: a query's values arrive as text."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="a name from GET /v1/models; default: the first captioner")
    attention: bool = Field(False, description="also every layer's and head's attention over the regions")
    search = SEARCH  # this task's defaults


def add_routes(app: FastAPI, server: Any) -> None:
    """``/v1/caption`` (``server``: :class:`attnkit.serve.app.Server`)."""
    limits = server.limits

    @app.post(
        "/v1/caption",
        summary="caption an image (captioner checkpoints): the body is the image file's bytes",
    )
    async def caption(request: HTTPRequest, query: Annotated[CaptionQuery, Query()]) -> dict[str, Any]:
        """``curl --data-binary @photo.png -H 'Content-Type: image/png' 'HOST/v1/caption?beam=4'``; a body
        that is no image, too large an image or one of an unreadable pixel mode answers 4xx."""
        captioner: Captioner = server.resolve(query.model, "caption")
        server.check_beam(query.beam)
        options = query.search_options()  # a ConfigError answers 422
        if options.sample and options.nbest > limits.max_samples:
            raise ServeError(422, f"nbest {options.nbest} is over the limit of {limits.max_samples} samples")
        image = await request.body()
        if not image:
            raise ServeError(
                422, "the body is empty: send the image file's bytes (e.g. curl --data-binary @x.png)"
            )
        captioner.check(image)  # a bad image: one line, 422, before any decoding
        call = Call.of(captioner.name, "caption", options=options, attention=query.attention)
        (answer,) = await server.run_job(
            call, [image], captioner.regions, alone=query.attention or options.sample
        )
        return {"model": captioner.name, **answer}
