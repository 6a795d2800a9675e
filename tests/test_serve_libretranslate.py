"""LibreTranslate's API over a served translator, spoken to by the real ``libretranslatepy`` client
against a live server: a paragraph is split into sentences, each translated as ``/v1/translate``
translates it and joined back with its whitespace; HTML keeps its markup; the languages come from
the translators' pairs; ``/detect`` needs a served language identifier; the key may come in the body.
"""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
libretranslatepy = pytest.importorskip(
    "libretranslatepy", reason="LibreTranslate's client is in the test extra"
)
import httpx  # noqa: E402

from attnkit.checkpoint import save_checkpoint  # noqa: E402
from attnkit.model import ClassifierConfig, TransformerClassifier  # noqa: E402
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402
from attnkit.tasks.translation.segments import html_sentences, sentences  # noqa: E402
from serve_helpers import app_server  # noqa: E402

CKPT = Path(__file__).parent / "fixtures" / "c46ef86" / "translation_step3.pt"  # de -> en
KEY = "lt-attnkit-test-0123456789"
PARAGRAPH = "Ein Hund läuft durch den Schnee.  Zwei Männer sitzen im Gras!\n\nEine Frau liest."


@pytest.fixture(scope="module")
def langid(tmp_path_factory):
    """An untrained identifier of de, en and fr (a classifier whose labels are language codes) that
    leans to de: texts it is given are German."""
    from decoding_helpers import tiny_tokenizer

    torch.manual_seed(0)
    tok = tiny_tokenizer()
    cfg = ClassifierConfig.preset("tiny", vocab_size=tok.src_vocab_size, n_classes=3)
    model = TransformerClassifier(cfg)
    with torch.no_grad():
        model.head.bias.copy_(torch.tensor([20.0, 0.0, 0.0]))
    state = {"arch": "classifier", "model_config": cfg.to_dict(), "labels": ["de", "en", "fr"]}
    state |= {
        "model": model.state_dict(),
        "tokenizer": tok.state_dict(),
        "experiment": {},
    }
    return save_checkpoint(state, tmp_path_factory.mktemp("langid") / "langid.pt")


@pytest.fixture(scope="module")
def url():
    with app_server(create_app(load_models([f"de_en={CKPT}"], device="cpu"))) as url:
        yield url


def ours(url: str, texts: list[str]) -> list[str]:
    r = httpx.post(f"{url}/v1/translate", json={"text": texts}, timeout=60)
    assert r.status_code == 200, r.text
    return [t["text"] for t in r.json()["translations"]]


def test_the_client_translates_a_paragraph_sentence_by_sentence(url):
    lt = libretranslatepy.LibreTranslateAPI(url)
    got = lt.translate(PARAGRAPH, "de", "en")
    a, b, c = ours(
        url, ["Ein Hund läuft durch den Schnee.", "Zwei Männer sitzen im Gras!", "Eine Frau liest."]
    )
    assert got == f"{a}  {b}\n\n{c}"  # each sentence as /v1/translate gives it, the layout kept
    assert lt.languages() == [{"code": "de", "name": "German", "targets": ["en"]}]
    with pytest.raises(urllib.error.HTTPError) as e:
        lt.detect("Ein Hund.")
    assert e.value.code == 404 and "no language identifier" in json.loads(e.value.read())["error"]


def test_a_list_html_alternatives_and_auto_as_json(url):
    body = {
        "q": ["<p>Ein Hund läuft.</p>", "Zwei <b>Männer</b> &amp; Frauen."],
        "source": "auto",
        "target": "en",
    }
    r = httpx.post(f"{url}/translate", json={**body, "format": "html", "alternatives": 2}, timeout=60)
    assert r.status_code == 200, r.text
    answer = r.json()
    (dog,), (two, men, women) = ours(url, ["Ein Hund läuft."]), ours(url, ["Zwei", "Männer", "& Frauen."])
    assert answer["translatedText"] == [f"<p>{dog}</p>", f"{two} <b>{men}</b> {women.replace('&', '&amp;')}"]
    assert [len(a) for a in answer["alternatives"]] == [2, 2]
    # no identifier served: the one source language served for English, said with confidence 0
    assert answer["detectedLanguage"] == [{"language": "de", "confidence": 0.0}] * 2


@pytest.mark.parametrize(
    "body, words",
    [
        ({"q": "Ein Hund.", "source": "de", "target": "fr"}, "no served model translates de to fr"),
        ({"q": "Ein Hund.", "source": "de", "target": "en", "format": "pdf"}, "format"),
        ({"q": "Ein Hund.", "source": "de", "target": "en", "colour": 1}, "unknown field 'colour'"),
        ({"q": [], "source": "de", "target": "en"}, "q: 1 to"),
        ({"source": "de", "target": "en"}, "missing field 'q'"),
    ],
)
def test_a_request_it_cannot_take_is_a_400_in_one_line(url, body, words):
    r = httpx.post(f"{url}/translate", json=body, timeout=60)
    assert r.status_code == 400 and words in r.json()["error"], r.text
    assert len(r.json()["error"].splitlines()) == 1
    bad = httpx.post(f"{url}/translate", content=b"\xff{", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "neither JSON nor a form" in bad.json()["error"]


def test_detect_and_auto_ask_a_served_identifier_and_the_key_may_come_in_the_body(langid):
    models = load_models([f"de_en={CKPT}", f"langid={langid}"], device="cpu")
    with app_server(create_app(models, api_keys=(KEY.encode(),))) as url:
        lt = libretranslatepy.LibreTranslateAPI(url, api_key=KEY)
        found = lt.detect("Ein Hund läuft.")
        assert sorted(d["language"] for d in found) == ["de", "en", "fr"]
        assert abs(sum(d["confidence"] for d in found) - 100) < 0.5
        assert found == sorted(found, key=lambda d: -d["confidence"])
        r = httpx.post(
            f"{url}/translate", json={"q": "Ein Hund.", "source": "auto", "target": "en", "api_key": KEY}
        )
        said = r.json()["detectedLanguage"]
        assert said["language"] == "de" == found[0]["language"] and said["confidence"] > 90, r.text
        # text already in the target language comes back as it is (LibreTranslate's rule)
        same = httpx.post(
            f"{url}/translate", json={"q": "Ein Hund.", "source": "en", "target": "en", "api_key": KEY}
        )
        assert same.json()["translatedText"] == "Ein Hund.", same.text
        assert lt.languages()[0]["code"] == "de"  # what is served: no key asked
        with pytest.raises(urllib.error.HTTPError) as e:
            libretranslatepy.LibreTranslateAPI(url, api_key="wrong-key-0123456789").translate(
                "Ein Hund.", "de", "en"
            )
        assert e.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as e:
            libretranslatepy.LibreTranslateAPI(url).translate("Ein Hund.", "de", "en")
        assert e.value.code == 401 and "the body's api_key" in json.loads(e.value.read())["error"]
        assert lt.translate("Ein Hund.", "de", "en")  # the key in the form body


def test_sentences_and_markup_come_back_as_they_stood():
    pieces, join = sentences("Dr. Müller kommt.  Wer?\n\n  Ein Hund läuft.\n", "de")
    assert pieces == ["Dr. Müller kommt.", "Wer?", "Ein Hund läuft."]
    assert join(["A.", "B?", "C."]) == "A.  B?\n\n  C.\n"
    assert sentences("   ", "de")[0] == [] and sentences("   ", "de")[1]([]) == "   "
    assert sentences("Ahoj. Jak se máš?", "cs")[0] == ["Ahoj.", "Jak se máš?"]  # no Czech rules: English
    markup = '<p class="x">Ein Hund.</p><script>var a = "Hund.";</script><!-- Hund. --><i>Tom &amp; Jerry</i>'
    pieces, rebuild = html_sentences(markup, "de")
    assert pieces == ["Ein Hund.", "Tom & Jerry"]
    assert rebuild(["A dog.", "Tom & Jerry <3"]) == (
        '<p class="x">A dog.</p><script>var a = "Hund.";</script><!-- Hund. --><i>Tom &amp; Jerry &lt;3</i>'
    )


def test_v1_translate_and_the_command_line_split_sentences_the_same_way(url, tmp_path, capsys):
    from attnkit.cli import main

    r = httpx.post(
        f"{url}/v1/translate", json={"text": [PARAGRAPH, "  "], "split_sentences": True}, timeout=60
    )
    assert r.status_code == 200, r.text
    paragraph, blank = r.json()["translations"]
    a, b, c = ours(
        url, ["Ein Hund läuft durch den Schnee.", "Zwei Männer sitzen im Gras!", "Eine Frau liest."]
    )
    assert paragraph["text"] == f"{a}  {b}\n\n{c}" and blank["text"] == "  " and blank["score"] == 0.0
    assert (
        httpx.post(
            f"{url}/v1/translate", json={"text": "Ein Hund.", "split_sentences": True, "prefix": "A"}
        ).status_code
        == 422
    )
    lines = tmp_path / "in.txt"
    lines.write_text("Ein Hund läuft durch den Schnee.  Zwei Männer sitzen im Gras!\nEine Frau liest.\n")
    assert (
        main(
            [
                "translate",
                "--checkpoint",
                str(CKPT),
                "--input",
                str(lines),
                "--split-sentences",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == f"{a}  {b}\n{c}\n"
