"""The schema-driven client of ``test_faults_http_schema`` against the classifier's and the
captioner's endpoints: every numeric field at its schema's bounds is taken, beyond them refused in one
line (422), and a request drawn anywhere never answers 5xx."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("fastapi")
hypothesis = pytest.importorskip("hypothesis")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402
from test_faults_http_schema import ANY_JSON, CROSS  # noqa: E402

LABELS = ["animal", "person", "thing"]


def _png(side: int = 32) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (side, side), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """A served untrained classifier and captioner (the schema is checked, not the answers)."""
    import torch

    from attnkit.checkpoint import save_checkpoint
    from attnkit.model import TransformerClassifier
    from attnkit.model.captioner import CaptionTransformer
    from attnkit.model.config import CaptionerConfig, ClassifierConfig
    from decoding_helpers import tiny_tokenizer

    torch.manual_seed(0)
    out, tok = tmp_path_factory.mktemp("served"), tiny_tokenizer()
    base = {"tokenizer": tok.state_dict(), "experiment": {}}
    clf_cfg = ClassifierConfig.preset("tiny", vocab_size=tok.src_vocab_size, n_classes=len(LABELS))
    clf = {"arch": "classifier", "model_config": clf_cfg.to_dict(), "labels": LABELS}
    save_checkpoint({**base, **clf, "model": TransformerClassifier(clf_cfg).state_dict()}, out / "clf.pt")
    cap_cfg = CaptionerConfig.preset("tiny", tgt_vocab_size=tok.tgt_vocab_size)
    cap = {"arch": "captioner", "model_config": cap_cfg.to_dict()}
    save_checkpoint({**base, **cap, "model": CaptionTransformer(cap_cfg).state_dict()}, out / "cap.pt")
    with TestClient(
        create_app(load_models([f"clf={out / 'clf.pt'}", f"cap={out / 'cap.pt'}"], device="cpu"))
    ) as c:
        yield c


def fields(client) -> dict[str, dict[str, dict]]:
    """Per endpoint, its numeric fields and their schemas: the classifier's JSON body, the captioner's
    query."""
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/classify"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    props = spec["components"]["schemas"][body["$ref"].split("/")[-1]]["properties"]
    query = {p["name"]: p["schema"] for p in spec["paths"]["/v1/caption"]["post"]["parameters"]}
    numeric = ("integer", "number")
    return {
        "/v1/classify": {n: p for n, p in props.items() if p.get("type") in numeric},
        "/v1/caption": {n: p for n, p in query.items() if p.get("type") in numeric},
    }


def ask(client, path: str, values: dict):
    if path == "/v1/classify":
        return client.post(path, json={"text": "A dog runs .", **values})
    query = {k: str(v).lower() if isinstance(v, bool) else v for k, v in values.items() if v is not None}
    return client.post(path, params=query, content=_png(), headers={"Content-Type": "image/png"})


def test_every_numeric_field_at_its_schema_s_bounds_is_accepted_and_beyond_refused(client):
    found = fields(client)
    assert set(found["/v1/classify"]) == {"top_k"} and len(found["/v1/caption"]) >= 10
    for path, props in found.items():
        for name, prop in props.items():
            integer = prop["type"] == "integer"
            kind = int if integer else float
            low, high = kind(prop.get("minimum", prop.get("exclusiveMinimum"))), kind(prop["maximum"])
            inside = [high, low if "minimum" in prop else low + (1 if integer else 1e-6)]
            sample = (
                {"sample": True}
                if name in ("temperature", "top_p") or (name, path) == ("top_k", "/v1/caption")
                else {}
            )
            for value in inside:
                r = ask(client, path, {**sample, name: value})
                error = r.json().get("error", "") if r.status_code != 200 else ""
                assert r.status_code == 200 or any(c in error for c in CROSS), (path, name, value, r.text)
            step = 1 if integer else 1e-3 * max(1.0, abs(high))
            for value in (high + step, low - step if "minimum" in prop else low):
                r = ask(client, path, {**sample, name: value})
                assert r.status_code == 422 and "\n" not in r.json()["error"], (path, name, value, r.text)


def test_drawn_requests_never_answer_5xx(client):
    names = {path: [*props, "model"] for path, props in fields(client).items()}
    names["/v1/classify"].append("text")
    names["/v1/caption"] += ["sample", "attention"]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(names)), st.data())
    def check(path, data):
        drawn = data.draw(st.lists(st.sampled_from(names[path]), max_size=3, unique=True))
        values = {n: data.draw(ANY_JSON) for n in drawn}
        if path == "/v1/caption":  # a query carries text: what a client could put there
            values = {n: v for n, v in values.items() if not isinstance(v, list)}
        r = ask(client, path, values)
        assert r.status_code < 500, (path, values, r.text)
        if r.headers.get("content-type", "").startswith("application/json") and r.status_code != 200:
            assert "\n" not in r.json()["error"], (path, values, r.text)

    check()
