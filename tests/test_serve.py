"""``attnkit serve``: the JSON API, its errors, dynamic batching and a graceful SIGTERM.

The product rules under test: the API answers what ``Translator`` answers; concurrent requests
share model calls and get exactly what they would get alone; bad input gets a JSON error naming the
problem and never takes the server down; SIGTERM lets in-flight requests finish.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.request

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
from fastapi.testclient import TestClient  # noqa: E402

from attnkit.checkpoint import save_checkpoint  # noqa: E402
from attnkit.errors import CheckpointError  # noqa: E402
from attnkit.plugin.http import Limits  # noqa: E402
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models, model_name  # noqa: E402
from attnkit.tasks.translation import Translator  # noqa: E402
from attnkit.tasks.translation.attention_payload import word_level, words  # noqa: E402
from serve_helpers import free_port, live_server, post, tiny_checkpoint  # noqa: E402

SENTENCES = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau mit einem roten Hut sitzt auf einer Bank.",
    "Kinder spielen.",
    "Ein kleines Mädchen läuft über eine grüne Wiese zu ihrer Mutter.",
    "Ein Hund.",
]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.set_num_threads(1)
    return tiny_checkpoint(tmp_path_factory)


@pytest.fixture(scope="module")
def models(ckpt):
    return load_models([f"tiny={ckpt}"], device="cpu")


@pytest.fixture(scope="module")
def client(models):
    with TestClient(create_app(models, limits=Limits(max_body_bytes=20_000, max_sentences=8))) as c:
        yield c


# -- translate -------------------------------------------------------------------------------------


@pytest.mark.parametrize("beam", [1, 3])
def test_translate_answers_what_the_translator_answers(client, ckpt, beam):
    expected = Translator.from_checkpoint(ckpt, device="cpu").translate(SENTENCES, beam=beam, nbest=1)
    r = client.post("/v1/translate", json={"text": SENTENCES, "beam": beam})
    assert r.status_code == 200, r.text
    got = r.json()["translations"]
    assert [t["text"] for t in got] == [e.text for e in expected]
    assert [t["score"] for t in got] == pytest.approx([e.score for e in expected], abs=1e-4)


def test_a_string_gives_one_translation_and_an_empty_string_an_empty_one(client):
    one = client.post("/v1/translate", json={"text": SENTENCES[0]}).json()
    many = client.post("/v1/translate", json={"text": [SENTENCES[0], "", "   "]}).json()
    assert len(one["translations"]) == 1 and one["model"] == "tiny"
    assert many["translations"][0]["text"] == one["translations"][0]["text"]
    assert many["translations"][1]["text"] == ""


def test_nbest_is_ranked_and_headed_by_the_translation(client):
    r = client.post("/v1/translate", json={"text": SENTENCES[:2], "beam": 4, "nbest": 3}).json()
    for t in r["translations"]:
        scores = [h["score"] for h in t["nbest"]]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)
        assert t["nbest"][0]["text"] == t["text"]


# -- bad input -------------------------------------------------------------------------------------

JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    "body, headers, status, fragment",
    [
        (b"{not json", JSON, 400, "not valid JSON"),
        (b'{"text": "a"}', {"Content-Type": "text/plain"}, 400, "must be JSON"),
        (b'{"text": 5}', JSON, 422, "text"),
        (b'{"text": "a", "beam": "4"}', JSON, 422, "beam"),
        (b'{"text": "a", "beam": 0}', JSON, 422, "beam"),
        (b'{"text": "a", "beem": 4}', JSON, 422, "unknown field 'beem'"),
        (b"{}", JSON, 422, "missing field 'text'"),
        (b'{"text": "a", "beam": 99}', JSON, 422, "limit of 16"),
        (b'{"text": "a", "beam": 2, "nbest": 3}', JSON, 422, "nbest 3"),
        (b'{"text": "a", "model": "nope"}', JSON, 404, "unknown model 'nope'"),
        (b'{"text": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}', JSON, 413, "limit is 8"),
        (b'{"text": "' + b"Hund " * 100 + b'"}', JSON, 422, "at most 64"),
        (b'{"text": "' + b"x" * 2500 + b'"}', JSON, 413, "limit is 2000"),
        (b'{"text": "' + b"x" * 30_000 + b'"}', JSON, 413, "size limit of 20000 bytes"),
    ],
)
def test_bad_input_gets_a_json_error_naming_the_problem(client, body, headers, status, fragment):
    r = client.post("/v1/translate", content=body, headers=headers)
    assert r.status_code == status, r.text
    assert fragment in r.json()["error"]
    assert client.post("/v1/translate", json={"text": "Ein Hund."}).status_code == 200  # still up


def test_streamed_body_over_the_limit_is_refused(client):
    chunks = (b'{"text": "' + b"x" * 5000 for _ in range(6))  # no Content-Length: chunked
    r = client.post("/v1/translate", content=chunks, headers=JSON)
    assert r.status_code == 413 and "20000 bytes" in r.json()["error"]


def test_unknown_path_and_method_are_json_errors(client):
    assert client.get("/v2/nothing").status_code == 404
    assert "error" in client.get("/v2/nothing").json()
    assert client.get("/v1/translate").status_code == 405


# -- models, tasks, health -------------------------------------------------------------------------


def test_models_health_and_docs(client):
    (m,) = client.get("/v1/models").json()["models"]
    assert m["name"] == "tiny" and m["task"] == "translate" and m["max_src_tokens"] == 64
    assert client.get("/health").json()["status"] == "ok"
    paths = client.get("/openapi.json").json()["paths"]
    # a translation model alone: the schema offers its endpoints, not the other tasks'
    assert set(paths) == {
        "/v1/translate", "/v1/attention", "/v1/models", "/health", "/ready", "/metrics",
        "/translate", "/languages",  # LibreTranslate's: the checkpoint names its language pair
    }  # fmt: skip
    assert client.get("/docs").status_code == 200


def test_endpoints_of_other_tasks_name_the_model_kind(client):
    r = client.post("/v1/generate", json={"text": "Ein"})
    assert r.status_code == 422 and "needs a language model" in r.json()["error"]
    r = client.post("/v1/classify", json={"text": "Ein", "model": "tiny"})
    assert r.status_code == 422 and "'tiny' is a translation model" in r.json()["error"]


class _FakeLM:
    name, task, arch = "lm", "generate", "lm"

    def describe(self):
        return {"name": self.name, "task": self.task}


def test_a_model_of_another_task_is_refused_by_translate(models):
    with TestClient(create_app([*models, _FakeLM()])) as c:
        r = c.post("/v1/translate", json={"text": "Ein Hund.", "model": "lm"})
        assert r.status_code == 422 and "'lm' is a language model" in r.json()["error"]
        assert (
            c.post("/v1/translate", json={"text": "Ein Hund."}).json()["model"] == "tiny"
        )  # default by task


def test_load_models_refuses_unservable_and_duplicate_checkpoints(tmp_path, ckpt):
    odd = save_checkpoint(
        {"arch": "gpt9", "model_config": {}, "model": {}, "tokenizer": {}}, tmp_path / "x.pt"
    )
    with pytest.raises(CheckpointError, match="unknown model arch 'gpt9'"):
        load_models([str(odd)], device="cpu")
    with pytest.raises(Exception, match="two checkpoints are named 'a'"):
        load_models([f"a={ckpt}", f"a={ckpt}"], device="cpu")
    assert model_name("runs/de_en/checkpoint_best.pt")[0] == "de_en"
    assert model_name("avg.pt")[0] == "avg"


# -- attention -------------------------------------------------------------------------------------


def test_words_group_pieces_at_word_starts():
    ws, index = words(["<s>", "\u2581Ein", "\u2581Fahr", "rad", ".", "</s>"])
    assert ws == ["<s>", "Ein", "Fahrrad.", "</s>"] and index == [0, 1, 2, 2, 2, 3]
    w = torch.softmax(torch.randn(2, 3, 6, 6), dim=-1)
    ww = word_level(w, index, index)  # rows averaged, columns summed: rows stay distributions
    assert ww.shape == (2, 3, 4, 4)
    torch.testing.assert_close(ww.sum(-1), torch.ones(2, 3, 4, dtype=w.dtype))
    torch.testing.assert_close(ww[..., 2, 1], w[..., 2:5, 1].mean(-1))


def test_attention_has_every_layer_and_head_and_a_word_alignment(client, models):
    r = client.post("/v1/attention", json={"text": SENTENCES[2], "beam": 2})
    assert r.status_code == 200, r.text
    d = r.json()
    cfg = models[0].translator.model.config
    seq = d["sequences"]
    S, T = len(seq["src"]["pieces"]), len(seq["tgt"]["pieces"])
    assert seq["tgt"]["pieces"][-1] == "</s>" and seq["tgt_in"]["pieces"][0] == "<s>"
    shapes = {
        "encoder_self": (cfg.n_encoder_layers, S, S),
        "decoder_self": (cfg.n_decoder_layers, T, T),
        "cross": (cfg.n_decoder_layers, T, S),
    }
    for kind, (L, R, C) in shapes.items():
        w = torch.tensor(d["attention"][kind]["weights"], dtype=torch.float64)
        assert w.shape == (L, cfg.n_heads, R, C), kind
        torch.testing.assert_close(w.sum(-1), torch.ones(L, cfg.n_heads, R, dtype=w.dtype), atol=0.01, rtol=0)
        assert (w * 1000 - (w * 1000).round()).abs().max() < 1e-6  # 3 decimals
    n_tgt_words = len(seq["tgt"]["words"]) - 1  # all but </s>
    links = d["alignment"]["links"]
    assert len(links) == n_tgt_words and all(0 <= x["src_word"] < len(seq["src"]["words"]) for x in links)
    translated = client.post("/v1/translate", json={"text": SENTENCES[2], "beam": 2}).json()["translations"][
        0
    ]
    assert d["translation"] == translated["text"]


def test_attention_has_rollout_flow_and_each_head_s_scores(client, models):
    from attnkit.attention.rollout import flow, rollout

    r = client.post("/v1/attention", json={"text": SENTENCES[2], "beam": 1, "flow": True})
    assert r.status_code == 200, r.text
    d = r.json()
    kinds = d["attention"]
    weights = {k: torch.tensor(kinds[k]["weights"]) for k in kinds}  # (L, H, R, C)
    encoder = rollout(weights["encoder_self"])  # (S, S), from the 3-decimal weights: close, not equal
    torch.testing.assert_close(torch.tensor(kinds["encoder_self"]["rollout"]), encoder, atol=0.01, rtol=0)
    cross = weights["cross"][-1].mean(0) @ encoder  # the last cross layer through the encoder
    torch.testing.assert_close(torch.tensor(kinds["cross"]["rollout"]), cross, atol=0.01, rtol=0)
    decoder = torch.tensor(kinds["decoder_self"]["flow"])  # (T, T): causal
    assert decoder.triu(1).abs().max() < 1e-3
    torch.testing.assert_close(decoder, flow(weights["decoder_self"]), atol=0.01, rtol=0)
    cfg = models[0].translator.model.config
    for kind, w in weights.items():
        heads = {name: torch.tensor(v) for name, v in d["heads"][kind].items()}
        assert heads["importance"].shape == (w.size(0), cfg.n_heads) and (heads["importance"] >= 0).all()
        assert heads["importance"].sum() > 0
        # each head's confidence is its queries' mean largest weight: the maps' own rows say so
        torch.testing.assert_close(heads["confidence"], w.amax(-1).mean(-1), atol=2e-3, rtol=0)
    # without flow asked for, none is computed; rollout always is
    plain = client.post("/v1/attention", json={"text": SENTENCES[2], "beam": 1}).json()
    assert "flow" not in plain["attention"]["cross"] and "rollout" in plain["attention"]["cross"]


def test_an_int8_model_s_heads_have_their_weights_scores_and_no_importance(models):
    from attnkit.tasks.translation import Translator
    from attnkit.tasks.translation.attention_payload import attention_payload

    float32 = models[0].translator
    int8 = Translator(float32.model, float32.tokenizer, "cpu", quantize="int8")
    heads = attention_payload(int8, SENTENCES[2], beam=1)["heads"]
    assert set(heads) == {"encoder_self", "decoder_self", "cross"}
    assert all(set(scores) == {"confidence", "entropy"} for scores in heads.values())


def test_attention_flow_past_its_length_is_refused_in_words(client, monkeypatch):
    from attnkit.tasks.translation import attention_payload

    monkeypatch.setattr(attention_payload, "FLOW_MAX", 4)  # the tiny model's own limit (64) is lower
    r = client.post("/v1/attention", json={"text": SENTENCES[2], "beam": 1, "flow": True})
    assert r.status_code == 422 and "flow follows at most 4 pieces" in r.json()["error"]
    assert client.post("/v1/attention", json={"text": SENTENCES[2], "beam": 1}).status_code == 200


def test_attention_of_empty_text_is_refused(client):
    r = client.post("/v1/attention", json={"text": "  "})
    assert r.status_code == 422 and "empty" in r.json()["error"]


# -- a real process --------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_finishes_in_flight_requests_then_exits(ckpt):
    waiting = ("--max-wait-ms", "1500", "--max-gap-ms", "1500")  # the request waits in the batcher
    with live_server(ckpt, extra=(*waiting, "--workers", "2")) as (url, proc):
        health = json.loads(urllib.request.urlopen(url + "/health").read())
        assert (health["workers"], health["workers_up"]) == (2, 2)  # --workers reached the decoder
        answer = {}
        t = threading.Thread(target=lambda: answer.update(r=post(url + "/v1/translate", {"text": SENTENCES})))
        t.start()
        time.sleep(0.5)  # the request now waits in the batcher
        proc.send_signal(signal.SIGTERM)
        t.join(60)
        code = proc.wait(30)
        status, body = answer["r"]
        assert status == 200 and len(body["translations"]) == len(SENTENCES)
        assert code in (0, -signal.SIGTERM), proc.stderr.read().decode()


def test_serve_command_errors_are_one_line(capsys, ckpt, tmp_path):
    from attnkit.cli import main

    def run(*argv):
        try:
            code = main(["serve", *map(str, argv)])
        except SystemExit as stop:  # the parser's refusal
            code = stop.code
        return code, capsys.readouterr().err.strip().splitlines()

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        code, err = run("--checkpoint", ckpt, "--port", busy.getsockname()[1])
    assert code == 2 and len(err) == 1 and "cannot listen on 127.0.0.1" in err[0], err
    code, err = run("--checkpoint", tmp_path / "missing.pt", "--port", free_port())
    assert code == 2 and len(err) == 1 and "checkpoint not found" in err[0], err
    code, err = run("--checkpoint", ckpt, "--port", free_port(), "--decoder", "thread", "--workers", 2)
    assert code == 2 and len(err) == 1 and "--workers needs --decoder process" in err[0], err
    for flag, value in (("--max-gap-ms", -1), ("--max-gap-ms", "inf"), ("--max-wait-ms", "nan")):
        code, err = run("--checkpoint", ckpt, "--port", free_port(), flag, value)
        assert (
            code == 2 and len(err) == 1 and f"argument {flag}: expected a number from 0 to 60000" in err[0]
        ), err
    with pytest.raises(SystemExit) as bad:  # argparse: a usage line and exit 2
        main(["serve", "--checkpoint", str(ckpt), "--workers", "0"])
    assert (
        bad.value.code == 2 and "expected auto or a number of processes from 1 to" in capsys.readouterr().err
    )


@pytest.mark.parametrize("group, wait", [(1, 0), (3, 2)])
def test_closed_loop_clients_get_what_offline_translation_gives(models, group, wait):
    from bench.serve_pool import closed_loop

    translator = models[0].translator
    texts = SENTENCES * 2
    run = closed_loop(translator, texts, clients=4, group=group, wait=wait, beam=2)
    assert run["texts"] == [t.text for t in translator.translate(texts, beam=2)]
    assert 0 < run["sentences_per_step"] <= 4
    assert run["joins"] <= len(texts) - 3  # the 4 first join together


def test_pool_benchmark_counts_model_calls_and_the_cpu_inside_them(ckpt):
    from bench.serve_pool import ModelCalls, closed_loop

    translator = Translator.from_checkpoint(ckpt, device="cpu")  # its own: ModelCalls wraps the model
    calls = ModelCalls(translator.model)
    texts = SENTENCES * 2
    offline = [t.text for t in translator.translate(texts, beam=2)]
    off = calls.take(len(texts))
    run = closed_loop(translator, texts, clients=4, group=1, wait=0, beam=2)
    pool = calls.take(len(texts))
    assert run["texts"] == offline  # the wrapped model decodes as before
    assert off["encoder_calls"] >= 1 and off["decoder_calls"] >= 1
    assert pool["decoder_calls"] == run["steps"] and pool["encoder_calls"] == run["joins"]
    assert pool["decoder_rows"] > pool["decoder_calls"]  # beam 2: several rows a step
    assert off["decoder_cpu_ms_per_sentence"] > 0 and pool["decoder_cpu_ms_per_sentence"] > 0
    assert pool["encoder_cpu_ms_per_sentence"] > 0
    emptied = calls.take(1)  # take starts the counts afresh
    assert emptied["decoder_calls"] == 0 and emptied["decoder_cpu_ms_per_sentence"] == 0


def test_load_benchmarks_send_the_checkpoints_source_language(tmp_path, ckpt):
    from bench.serve_load import source_lang

    from attnkit.checkpoint import load_checkpoint

    state = load_checkpoint(ckpt)
    state["experiment"] = {"data": {"src_lang": "en", "tgt_lang": "de"}}
    en_de = save_checkpoint(state, tmp_path / "en_de.pt")
    assert source_lang(str(en_de), None) == "en"
    assert source_lang(str(en_de), "fr") == "fr"  # said outright wins
    del state["experiment"]
    assert source_lang(str(save_checkpoint(state, tmp_path / "bare.pt")), None) == "de"
