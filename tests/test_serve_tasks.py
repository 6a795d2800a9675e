"""The server with a language model and a classifier: /v1/generate and /v1/classify answer as the
Python API does, and every endpoint of another task answers 422 naming what it needs (404 for an
unknown model name)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
from fastapi.testclient import TestClient  # noqa: E402

from attnkit.checkpoint import save_checkpoint  # noqa: E402
from attnkit.data.tokenizer import SubwordTokenizer  # noqa: E402
from attnkit.model import ClassifierConfig, LMConfig, TransformerClassifier, TransformerLM  # noqa: E402
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402
from attnkit.tasks.classification import Classifier  # noqa: E402
from attnkit.tasks.language_model import LanguageModel  # noqa: E402

TEXT = [
    f"{a} {b} {c} ."
    for a in ("A dog", "Two men", "A woman", "The cat")
    for b in ("runs", "sits", "plays")
    for c in ("on the grass", "in the snow")
]
LABELS = ["animal", "person", "thing"]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("served")
    tok = SubwordTokenizer.train(TEXT, TEXT, vocab_size=28)
    base = {"tokenizer": tok.state_dict(), "experiment": {}}
    V = tok.src_vocab_size
    lm_cfg = LMConfig.preset("tiny", vocab_size=V, max_len=32)
    clf_cfg = ClassifierConfig.preset("tiny", vocab_size=V, n_classes=3, pooling="attention")
    lm = save_checkpoint(
        {**base, "arch": "lm", "model_config": lm_cfg.to_dict(), "model": TransformerLM(lm_cfg).state_dict()},
        out / "lm.pt",
    )
    clf = save_checkpoint(
        {
            **base,
            "arch": "classifier",
            "model_config": clf_cfg.to_dict(),
            "labels": LABELS,
            "model": TransformerClassifier(clf_cfg).state_dict(),
        },
        out / "clf.pt",
    )
    return lm, clf


@pytest.fixture(scope="module")
def client(ckpts):
    lm, clf = ckpts
    with TestClient(create_app(load_models([f"lm={lm}", f"clf={clf}"], device="cpu"))) as c:
        yield c


def test_models_lists_both_tasks(client):
    models = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert models["lm"]["task"] == "generate" and models["clf"]["task"] == "classify"
    assert models["clf"]["labels"] == LABELS


def test_classify_answers_as_the_python_api(client, ckpts):
    texts = ["A dog runs .", "Two men sit in the snow ."]
    r = client.post("/v1/classify", json={"text": texts, "top_k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "clf" and len(body["results"]) == 2
    expected = Classifier.from_checkpoint(ckpts[1], device="cpu").predict(texts, top_k=3)
    for got, want in zip(body["results"], expected, strict=True):
        assert [x["label"] for x in got["labels"]] == [label for label, _ in want]
        assert [x["probability"] for x in got["labels"]] == pytest.approx([p for _, p in want], abs=1e-6)
    one = client.post("/v1/classify", json={"text": "A dog runs ."}).json()["results"]
    assert len(one) == 1 and len(one[0]["labels"]) == 1


def test_generate_answers_as_the_python_api_and_sampling_is_seeded(client, ckpts):
    lm = LanguageModel.from_checkpoint(ckpts[0], device="cpu")
    r = client.post("/v1/generate", json={"text": "A dog", "max_tokens": 5})
    assert r.status_code == 200, r.text
    (gen,) = r.json()["generations"]
    (want,) = lm.generate(["A dog"], max_new_tokens=5)[0]
    assert gen["text"] == want.text and gen["score"] == pytest.approx(want.score, abs=1e-5)

    def sample(seed):
        body = {
            "text": "A dog",
            "sample": True,
            "temperature": 5.0,
            "num_samples": 3,
            "seed": seed,
            "max_tokens": 6,
        }
        return [g["text"] for g in client.post("/v1/generate", json=body).json()["generations"]]

    assert sample(1) == sample(1) and len(sample(1)) == 3
    top1 = client.post(
        "/v1/generate", json={"text": "A dog", "sample": True, "top_k": 1, "max_tokens": 5}
    ).json()
    assert top1["generations"][0]["text"] == gen["text"]  # top-k 1 is greedy


@pytest.mark.parametrize(
    "path, body, status, fragment",
    [
        ("/v1/translate", {"text": "A dog ."}, 422, "no loaded model serves /v1/translate"),
        ("/v1/attention", {"text": "A dog ."}, 422, "needs a translation model"),
        ("/v1/translate", {"text": "A dog .", "model": "clf"}, 422, "'clf' is a classifier"),
        ("/v1/generate", {"text": "A dog", "model": "clf"}, 422, "/v1/generate needs a language model"),
        ("/v1/classify", {"text": "A dog", "model": "lm"}, 422, "/v1/classify needs a classifier"),
        ("/v1/classify", {"text": "A dog", "model": "nope"}, 404, "unknown model 'nope'"),
        (
            "/v1/classify",
            {"text": "A dog", "top_k": 4},
            422,
            "top_k: Input should be less than or equal to 3",
        ),
        ("/v1/classify", {"text": ["A dog", " "]}, 422, "text 1 is empty"),
        ("/v1/classify", {"text": "A dog", "beam": 2}, 422, "unknown field 'beam'"),
        (
            "/v1/generate",
            {"text": "A dog", "num_samples": 2},
            422,
            "nbest 2 must be between 1 and the beam size 1",
        ),
        ("/v1/generate", {"text": "A dog", "top_p": 0}, 422, "top_p"),
        ("/v1/generate", {"text": "dog " * 40}, 422, "takes at most 31"),
    ],
)
def test_wrong_task_and_bad_requests_name_the_problem(client, path, body, status, fragment):
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    assert fragment in r.json()["error"]


def test_a_served_object_without_a_member_of_the_protocol_is_refused_at_load(ckpts, monkeypatch):
    """``ServedModel`` lists what the server calls: a task whose ``serve`` makes an object lacking one
    of them (here ``operation``) fails at load in one line naming it, not at its first request."""
    import dataclasses

    from attnkit import plugin
    from attnkit.errors import ConfigError
    from attnkit.plugin.served import ServedModel

    class NoOperation:
        name, task, arch = "lm", "generate", "lm"

        def describe(self) -> dict:
            return {}

        def release(self) -> None:
            pass

    lm, _ = ckpts
    (served,) = load_models([f"lm={lm}"], device="cpu")
    assert isinstance(served, ServedModel)  # the real one has every member
    generate = plugin.task_named("generate")
    broken = dataclasses.replace(generate, serve=lambda *a, **k: NoOperation())
    monkeypatch.setattr("attnkit.serve.tasks.task_of", lambda state, path="": broken)
    assert not isinstance(NoOperation(), ServedModel)
    with pytest.raises(ConfigError, match=r"serves a NoOperation without operation$"):
        load_models([f"lm={lm}"], device="cpu")
