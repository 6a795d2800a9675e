"""A schema-driven client against a served tiny model: every numeric field of every JSON endpoint, at
its schema's bounds, is accepted (the schema states what the server takes), beyond them refused in
one line (422), and drawn anywhere never a 5xx."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
hypothesis = pytest.importorskip("hypothesis")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402

CKPT = Path(__file__).parent / "fixtures" / "c46ef86" / "translation_step3.pt"
BODIES = {
    "/v1/translate": {"text": "Ein Hund."},
    "/v1/generate": {"text": "A dog"},
    "/v1/attention": {"text": "Ein Hund."},
    "/v1/completions": {"prompt": "A dog", "max_tokens": 3},  # OpenAI's, LibreTranslate's: refused with 400
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "A dog"}], "max_tokens": 3},
    "/translate": {"q": "Ein Hund.", "source": "de", "target": "en"},
}
REFUSED = {path: 400 if not path.startswith("/v1/") or "completions" in path else 422 for path in BODIES}
# the string-valued fields drawn beside the numeric ones
TEXTS = {
    "/v1/translate": ["sample", "text", "prefix"],
    "/v1/generate": ["sample", "text", "stream"],
    "/v1/attention": ["text"],
    "/v1/completions": ["prompt", "stop", "stream", "echo"],
    "/v1/chat/completions": ["messages", "stop", "stream"],
    "/translate": ["q", "source", "target", "format"],
}
# a rule between fields, which a JSON schema cannot state: a 422 that names it is the documented answer
CROSS = ("nbest", "min_length", "max_len_a, max_len_b", "shape sampling", "stream")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from attnkit.checkpoint import save_checkpoint
    from attnkit.model import TransformerLM
    from attnkit.model.config import LMConfig
    from decoding_helpers import tiny_tokenizer

    tok = tiny_tokenizer()
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size, max_len=48)
    lm = tmp_path_factory.mktemp("lm") / "lm.pt"
    state = {"arch": "lm", "model_config": cfg.to_dict(), "model": TransformerLM(cfg).state_dict()}
    save_checkpoint({**state, "tokenizer": tok.state_dict(), "experiment": {}}, lm)
    with TestClient(create_app(load_models([str(CKPT), f"lm={lm}"], device="cpu"))) as c:
        yield c


def numeric_fields(client) -> list[tuple[str, str, dict]]:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    found = []
    for path in BODIES:
        body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        schema = schemas[body["$ref"].split("/")[-1]] if "$ref" in body else body  # or inline
        for name, prop in schema["properties"].items():
            if prop.get("type") in ("integer", "number"):
                found.append((path, name, prop))
    return found


def test_every_numeric_field_at_its_schema_s_bounds_is_accepted_and_beyond_refused(client):
    fields = numeric_fields(client)
    assert len(fields) >= 20 and ("/v1/attention", "beam") in [(p, n) for p, n, _ in fields]
    for path, name, prop in fields:
        integer = prop["type"] == "integer"
        kind = int if integer else float  # FastAPI writes every bound as a JSON float (1.0)
        low, high = kind(prop.get("minimum", prop.get("exclusiveMinimum"))), kind(prop["maximum"])
        inside = [high, low if "minimum" in prop else low + (1 if integer else 1e-6)]
        sampled = name in ("temperature", "top_k", "top_p") and "sample" in TEXTS[path]
        sample = {"sample": True} if sampled else {}
        for value in inside:
            r = client.post(path, json={**BODIES[path], **sample, name: value})
            error = r.json().get("error", "") if r.status_code != 200 else ""
            assert r.status_code == 200 or any(c in error for c in CROSS), (path, name, value, r.text)
        step = 1 if integer else 1e-3 * max(1.0, abs(high))
        for value in (high + step, low - step if "minimum" in prop else low):
            r = client.post(path, json={**BODIES[path], **sample, name: value})
            error = r.json()["error"]
            error = error["message"] if isinstance(error, dict) else error  # OpenAI's body
            assert r.status_code == REFUSED[path] and "\n" not in error, (path, name, value, r.text)


ANY_JSON = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False),  # what JSON can carry
    st.text(max_size=20),
    st.lists(st.text(max_size=10), max_size=3),
)


def test_drawn_requests_never_answer_5xx(client):
    fields = {path: [] for path in BODIES}
    for path, name, _ in numeric_fields(client):
        fields[path].append(name)
    for path in BODIES:
        fields[path] += TEXTS[path]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(BODIES)), st.data())
    def check(path, data):
        names = data.draw(st.lists(st.sampled_from(fields[path]), max_size=3, unique=True))
        body = {**BODIES[path], **{n: data.draw(ANY_JSON) for n in names}}
        r = client.post(path, json=body)
        assert r.status_code < 500, (path, body, r.text)
        if r.headers.get("content-type", "").startswith("application/json") and r.status_code != 200:
            error = r.json()["error"]
            assert "\n" not in (error["message"] if isinstance(error, dict) else error), (path, body, r.text)

    check()


def test_bounds_are_finite_numbers():
    from attnkit.decoding.defaults import BOUNDS

    assert all(math.isfinite(b.low) and math.isfinite(b.high) for b in BOUNDS.values())


def test_the_schema_offers_only_what_a_loaded_model_serves(client):
    """No classifier or captioner is loaded here: their endpoints are not in the schema (a client that
    calls one anyway gets 422, naming what it needs), and a blank text is schema-invalid."""
    spec = client.get("/openapi.json").json()
    assert set(spec["paths"]) == {
        "/health", "/ready", "/metrics", "/v1/models", "/v1/translate", "/v1/attention", "/v1/generate",
        "/v1/completions", "/v1/chat/completions", "/translate", "/languages",
    }  # fmt: skip
    r = client.post("/v1/classify", json={"text": "A dog"})
    assert r.status_code == 422 and "needs a classifier" in r.json()["error"]
    model = spec["components"]["schemas"]["TranslateRequest"]["properties"]["model"]
    assert model["anyOf"] == [{"type": "string", "enum": ["translation_step3"]}, {"type": "null"}]
    text = spec["components"]["schemas"]["AttentionRequest"]["properties"]["text"]
    assert text["pattern"] == r"\S"
    assert client.post("/v1/attention", json={"text": " "}).status_code == 422
