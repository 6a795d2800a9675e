"""LibreTranslate's API over the served translators, so the applications and browser extensions that
integrate a self-hosted LibreTranslate (and its ``libretranslatepy`` client) use attnkit unchanged:
``POST /translate``, ``GET /languages`` and ``POST /detect``, bodies as JSON or as a form.

- ``/translate``: ``q`` (a text, or a list of them), ``source`` (a code, or ``auto``), ``target``,
  ``format`` (``text`` or ``html``: the markup kept, its text translated), ``alternatives`` (that many
  more translations, the beam's next best) and ``api_key``. Each text is split into sentences
  (:mod:`.segments`), all of them translated as one batch by the translator of that language pair,
  and joined back as they stood. ``auto`` asks a served language identifier; without one, it
  is the one source language served for the target, if there is only one (confidence 0).
- ``/languages``: each source language served, its name and the targets it is translated to.
- ``/detect``: the languages of ``q`` by a served language identifier
  (:mod:`attnkit.tasks.classification.languages`, which ``auto`` asks too).

Errors are LibreTranslate's body, ``{"error": "one line"}``, a request it cannot take a 400.
``api_key`` is checked where every key is (:mod:`attnkit.serve.keys`), in the body or the header.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from pydantic import Field

from ...decoding.options import SearchOptions
from ...plugin.http import Call, Request, ServeError, body_schema, parse_body
from .segments import split_texts

NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "es": "Spanish", "fi": "Finnish", "fr": "French", "hi": "Hindi", "hu": "Hungarian", "it": "Italian",
    "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


class TranslateBody(Request):
    q: str | list[str] = Field(description="a text, or a list of texts")
    source: str = Field(description="the source language's code, or 'auto'")
    target: str = Field(description="the target language's code")
    format: Literal["text", "html"] = "text"
    alternatives: int = Field(0, ge=0, le=8, description="more translations of each text, next best first")
    api_key: str | None = Field(None, description="the API key, where no Authorization header carries it")


def error_body(status: int, line: str) -> tuple[int, dict[str, Any]]:
    """LibreTranslate's error: ``{"error": "one line"}``, a request it cannot take a 400."""
    return 400 if status == 422 else status, {"error": line}


def pairs(server: Any) -> dict[tuple[str, str], Any]:
    """(source, target) -> the first served translator of that pair."""
    found: dict[tuple[str, str], Any] = {}
    for m in server.models:
        if m.task == "translate" and getattr(m, "src_lang", None) and getattr(m, "tgt_lang", None):
            found.setdefault((m.src_lang, m.tgt_lang), m)
    return found


def add_routes(app: FastAPI, server: Any) -> None:
    """LibreTranslate's three endpoints (``server``: :class:`attnkit.serve.app.Server`), where a
    served translator names its language pair (its training data's ``src_lang`` and ``tgt_lang``)."""
    if not pairs(server):
        return
    for path in ("/translate", "/languages"):
        server.error_shapes[path] = error_body
    server.body_key_paths.add("/translate")
    server.open_paths.add("/languages")  # what is served, as /openapi.json says it: no key asked

    @app.get("/languages", summary="LibreTranslate's languages: the served language pairs")
    async def languages() -> list[dict[str, Any]]:
        targets: dict[str, list[str]] = {}
        for source, target in pairs(server):
            targets.setdefault(source, []).append(target)
        return [{"code": s, "name": NAMES.get(s, s), "targets": t} for s, t in targets.items()]

    @app.post("/translate", summary="LibreTranslate's translation", openapi_extra=body_schema(TranslateBody))
    async def translate(request: HTTPRequest) -> dict[str, Any]:
        body = parse_body(await request.body(), request.headers.get("content-type", ""), TranslateBody)
        return await _translate(server, body)


async def _translate(server: Any, body: TranslateBody) -> dict[str, Any]:
    """``/translate``: the texts' sentences translated in one batch per language pair, joined back."""
    texts = [body.q] if isinstance(body.q, str) else body.q
    if not texts or len(texts) > server.limits.max_sentences:
        raise ServeError(400, f"q: 1 to {server.limits.max_sentences} texts, got {len(texts)}")
    served, n = pairs(server), body.alternatives + 1
    detected = await _sources(server, body, texts, served)
    joined: list[list[str]] = [[] for _ in texts]  # each text's translation and alternatives
    for source in dict.fromkeys(s for s, _ in detected):
        mine = [i for i, (s, _) in enumerate(detected) if s == source]
        if source == body.target:  # already in the target language: as it is (LibreTranslate's rule)
            for i in mine:
                joined[i] = [texts[i]] * n
            continue
        model = served.get((source, body.target))
        if model is None:
            have = ", ".join(f"{s}→{t}" for s, t in served) or "none"
            raise ServeError(400, f"no served model translates {source} to {body.target} (served: {have})")
        pieces, combine = split_texts([texts[i] for i in mine], source, markup=body.format == "html")
        for i, done in zip(mine, combine(await _run(server, model, pieces, n)), strict=True):
            joined[i] = [t for t, _ in done.nbest][:n] if n > 1 else [done.text]
    answer: dict[str, Any] = {
        "translatedText": joined[0][0] if isinstance(body.q, str) else [j[0] for j in joined]
    }
    if body.alternatives:
        alts = [j[1:] for j in joined]
        answer["alternatives"] = alts[0] if isinstance(body.q, str) else alts
    if body.source == "auto":
        said = [{"language": s, "confidence": c} for s, c in detected]
        answer["detectedLanguage"] = said[0] if isinstance(body.q, str) else said
    return answer


async def _sources(
    server: Any, body: TranslateBody, texts: list[str], served: dict
) -> list[tuple[str, float]]:
    """Each text's source language and the confidence in it (100: given)."""
    if body.source != "auto":
        return [(body.source, 100.0)] * len(texts)
    detect = server.services.get("detect_language")  # a served language identifier's (classification)
    if detect is not None:
        found = await detect([t if t.strip() else "." for t in texts])
        return [langs[0] for langs in found]
    sources = sorted({s for s, t in served if t == body.target})
    if len(sources) != 1:
        raise ServeError(
            400, f"source auto: no language identifier is served to choose among {sources or 'none'}"
        )
    return [(sources[0], 0.0)] * len(texts)


async def _run(server: Any, model: Any, pieces: list[str], n: int) -> list[Any]:
    """Each piece's translation with its ``n`` best (the beam's), in one batched job."""
    if not pieces:
        return []
    options = SearchOptions.of(None, beam=max(n, SearchOptions().beam), nbest=n)
    cost = sum(server.check_sentence(model, p, i) for i, p in enumerate(pieces))
    return await server.run_job(Call.of(model.name, "translate", options=options, prefix=None), pieces, cost)
