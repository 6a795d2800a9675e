"""The classifier's endpoints, added by the server to its app: ``POST /v1/classify``, and
LibreTranslate's ``POST /detect`` answered by a language identifier (:mod:`.languages`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import Field, WithJsonSchema, create_model

from ...plugin.http import Call, Request, ServeError
from . import languages
from .classifier import Classifier

# Something to classify: the schema says not blank, the handler refuses a blank one by its index.
Text = Annotated[str, WithJsonSchema({"type": "string", "pattern": r"\S"})]


class ClassifyRequest(Request):
    text: Text | list[Text] = Field(description="one text, or a list of texts; none blank")
    model: str | None = Field(None, description="a name from GET /v1/models; default: the first classifier")
    top_k: int = Field(1, ge=1, description="labels returned per text, most probable first")


def request_of(max_labels: int) -> type[ClassifyRequest]:
    """The request whose schema states ``top_k``'s maximum: the most labels of a served classifier (a
    model with fewer answers 422, naming its count)."""
    top_k = Field(1, ge=1, le=max_labels, description="labels returned per text, most probable first")
    return create_model("ClassifyRequest", __base__=ClassifyRequest, top_k=(int, top_k))


def add_routes(app: FastAPI, server: Any) -> None:
    """``/v1/classify`` (``server``: :class:`attnkit.serve.app.Server`)."""
    limits = server.limits
    languages.add_routes(app, server)
    labels = [len(m.labels) for m in server.models if isinstance(m, Classifier)]

    async def classify(req: ClassifyRequest) -> dict[str, Any]:
        model: Classifier = server.resolve(req.model, "classify")
        texts = [req.text] if isinstance(req.text, str) else req.text
        if len(texts) > limits.max_sentences:
            raise ServeError(
                413, f"too many texts: {len(texts)} (the limit is {limits.max_sentences} per request)"
            )
        n_labels = len(model.labels)
        if req.top_k > n_labels:
            raise ServeError(
                422, f"top_k {req.top_k} is larger than the {n_labels} labels of model {model.name!r}"
            )
        for i, text in enumerate(texts):
            if not text.strip():
                raise ServeError(422, f"text {i} is empty: nothing to classify")
        cost = sum(server.check_sentence(model, t, i) for i, t in enumerate(texts))
        results = await server.run_job(Call.of(model.name, "classify", top_k=req.top_k), texts, cost)
        return {
            "model": model.name,
            "results": [{"labels": [{"label": a, "probability": p} for a, p in r]} for r in results],
        }

    classify.__annotations__["req"] = request_of(max(labels, default=2))  # the class, not its name
    app.post("/v1/classify", summary="label texts (classifier checkpoints)")(classify)
