"""Writes ``reference/http.md`` from the server's own OpenAPI schema when the build starts: an app
serving one untrained model of each built-in task (tiny, made here in a temporary folder), so every
endpoint, field, bound and default on the page is the one the server checks."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Any


def _checkpoints(folder: Path) -> list[str]:
    """A tiny untrained checkpoint per built-in task: translation, a language model, a classifier,
    a captioner."""
    import torch

    from attnkit.checkpoint import save_checkpoint
    from attnkit.data.tokenizer import SubwordTokenizer
    from attnkit.model import TransformerClassifier, TransformerLM
    from attnkit.model.captioner import CaptionTransformer
    from attnkit.model.config import CaptionerConfig, ClassifierConfig, LMConfig, TransformerConfig
    from attnkit.model.transformer import Transformer

    text = ["ein hund rennt", "zwei katzen schlafen", "a dog runs", "two cats sleep"] * 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the corpus cannot fill the vocabulary
        tok = SubwordTokenizer.train(text, text, vocab_size=40)
    V, base = tok.src_vocab_size, {"tokenizer": tok.state_dict(), "experiment": {}}
    torch.manual_seed(0)
    models = {  # task: (arch, model config, model class, what else the checkpoint holds)
        "translate": ("transformer", TransformerConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V)),
        "generate": ("lm", LMConfig.preset("tiny", vocab_size=V, max_len=32)),
        "classify": ("classifier", ClassifierConfig.preset("tiny", vocab_size=V, n_classes=2)),
        "caption": ("captioner", CaptionerConfig.preset("tiny", tgt_vocab_size=V)),
    }
    classes = {"translate": Transformer, "generate": TransformerLM}
    classes |= {"classify": TransformerClassifier, "caption": CaptionTransformer}
    specs = []
    for name, (arch, cfg) in models.items():
        path = folder / f"{name}.pt"
        state = {
            **base,
            "arch": arch,
            "model_config": cfg.to_dict(),
            "model": classes[name](cfg).state_dict(),
        }
        if name == "classify":
            state["labels"] = ["a", "b"]
        save_checkpoint(state, path)
        specs.append(f"{name}={path}")
    return specs


def _spec() -> dict[str, Any]:
    """The app's schema, as ``GET /openapi.json`` gives it (no decoder started: nothing decodes)."""
    from attnkit.serve.app import create_app
    from attnkit.serve.tasks import load_models

    with tempfile.TemporaryDirectory() as tmp:
        return create_app(load_models(_checkpoints(Path(tmp)), device="cpu")).openapi()


def _bounds(prop: dict[str, Any]) -> str:
    low = prop.get("minimum", prop.get("exclusiveMinimum"))
    high = prop.get("maximum")
    if low is None and high is None:
        return ""

    def show(v: float | None, infinite: str) -> str:
        if v is None:
            return infinite
        return f"{int(v):,}" if prop.get("type") == "integer" else f"{v:g}"

    left = "(" if "exclusiveMinimum" in prop else "["
    return f"{left}{show(low, '-∞')}, {show(high, '∞')}]"


def _kind(prop: dict[str, Any]) -> str:
    if "anyOf" in prop:
        return " or ".join(_kind(p) for p in prop["anyOf"])
    if prop.get("type") == "array":
        return f"list of {_kind(prop.get('items', {}))}"
    return str(prop.get("type", prop.get("$ref", "").split("/")[-1] or "any"))


def _fields(props: dict[str, Any], required: list[str]) -> list[str]:
    rows = ["| field | type | range | default | what it is |", "| --- | --- | --- | --- | --- |"]
    for name, prop in props.items():
        default = "(required)" if name in required else json.dumps(prop.get("default"), ensure_ascii=False)
        text = str(prop.get("description", "")).replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{name}` | {_kind(prop)} | {_bounds(prop)} | `{default}` | {text} |")
    return rows


def _query_field(parameter: dict[str, Any]) -> dict[str, Any]:
    schema = parameter.get("schema", {})
    return {**schema, "description": parameter.get("description", schema.get("description", ""))}


def _page(spec: dict[str, Any]) -> str:
    schemas = spec.get("components", {}).get("schemas", {})
    out = [
        "# HTTP API",
        "",
        "`attnkit serve --checkpoint CKPT ...` answers these requests; the server's own OpenAPI schema",
        "(`GET /openapi.json`, and `GET /docs` on a running server) is where this page comes from, generated",
        "when the site is built from a server with one model of each built-in task. A server lists only",
        "the endpoints its loaded models serve; a request outside a range below answers 422 in one line.",
        "",
    ]
    for path, methods in spec.get("paths", {}).items():
        for method, op in methods.items():
            out += [f"## `{method.upper()} {path}`", "", str(op.get("summary", "")), ""]
            params = [p for p in op.get("parameters", []) if p.get("in") == "query"]
            if params:
                props = {
                    p["name"]: {
                        **p.get("schema", {}),
                        "description": p.get("description", p.get("schema", {}).get("description", "")),
                    }
                    for p in params
                }
                out += ["Query fields (the body is the image file's bytes):", "", *_fields(props, []), ""]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body and "$ref" in body:
                schema = schemas[body["$ref"].split("/")[-1]]
                out += [
                    "Body (JSON):",
                    "",
                    *_fields(schema.get("properties", {}), schema.get("required", [])),
                    "",
                ]
            codes = ", ".join(sorted(op.get("responses", {})))
            out += [f"Answers: {codes}.", ""]
    return "\n".join(out)


def _write(app) -> None:
    path = Path(app.srcdir) / "reference" / "http.md"
    text = _page(_spec())
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def setup(app):
    app.connect("builder-inited", _write)
    return {"parallel_read_safe": True, "version": "1"}
