"""``/metrics`` (Prometheus' text format, read back with prometheus_client's own parser) counts what
the server answered and decoded; ``/ready`` is true only when every model can answer; both, like
``/health``, answer without a key."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
pytest.importorskip("prometheus_client", reason="/metrics needs the serve extra")
from fastapi.testclient import TestClient  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402

CKPT = Path(__file__).parent / "fixtures" / "c46ef86" / "translation_step3.pt"
KEY = "metrics-test-key-0123456789"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, its labels sorted) -> value, of every sample in a scrape."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_answers_by_endpoint_and_what_was_decoded():
    auth = {"Authorization": f"Bearer {KEY}"}
    with TestClient(create_app(load_models([str(CKPT)], device="cpu"), api_keys=(KEY.encode(),))) as c:
        assert (
            c.post("/v1/translate", json={"text": ["Ein Hund läuft.", "Ein Mann."]}, headers=auth).status_code
            == 200
        )
        assert (
            c.post("/v1/translate", json={"text": "Ein Hund.", "beam": 99}, headers=auth).status_code == 422
        )
        assert c.post("/v1/translate", json={"text": "Ein Hund."}).status_code == 401  # no key
        assert c.get("/wp-admin/setup.php", headers=auth).status_code == 404
        scrape = c.get("/metrics")  # no key asked
        assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
        got = samples(scrape.text)

        def count(endpoint: str, status: str) -> float:
            return got[("attnkit_requests_total", (("endpoint", endpoint), ("status", status)))]

        assert count("/v1/translate", "200") == 1 and count("/v1/translate", "422") == 1
        assert count("/v1/translate", "401") == 1 and count("other", "404") == 1  # a scanner's path: "other"
        assert got[("attnkit_request_seconds_count", (("endpoint", "/v1/translate"),))] == 3
        assert got[("attnkit_sentences_total", ())] == 2 and got[("attnkit_source_tokens_total", ())] > 4
        assert got[("attnkit_decode_steps_total", ())] > 0
        assert got[("attnkit_decode_step_rows_total", ())] >= got[("attnkit_decode_steps_total", ())]
        assert got[("attnkit_requests_in_flight", ())] == 0 and got[("attnkit_workers_up", ())] == 1
        assert got[("attnkit_worker_restarts_total", ())] == 0
        ready = c.get("/ready")
        assert ready.status_code == 200 and ready.json() == {
            "status": "ready",
            "models": ["translation_step3"],
        }


def test_ready_is_false_until_the_decoding_can_answer():
    app = create_app(load_models([str(CKPT)], device="cpu"))
    c = TestClient(app)  # not entered: the app has not started, no decoder runs
    not_yet = c.get("/ready")
    assert (
        not_yet.status_code == 503
        and not_yet.json()["status"] == "not ready: the server is starting or stopping"
    )
    assert c.get("/health").status_code == 503
