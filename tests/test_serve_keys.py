"""API keys (attnkit.serve.keys): read from flags, files and ATTNKIT_API_KEYS with one-line errors
that never show a key; with keys set every request but liveness and the API's description needs
``Authorization: Bearer KEY`` (401 with a one-line reason otherwise), the real server says how many
keys it accepts, and the attention page asks for the key once and then works."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
from fastapi.testclient import TestClient  # noqa: E402

from attnkit.errors import ConfigError  # noqa: E402
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.keys import ENV, accepted, bearer, read_keys  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402
from cli_helpers import assert_user_error  # noqa: E402
from fault_helpers import cli  # noqa: E402
from serve_helpers import live_server, tiny_checkpoint  # noqa: E402
from test_serve_page import _wait, driver, translate_on_the_page  # noqa: E402, F401  (driver: the browser, a fixture)

KEY = "k3y-0123456789abcdef"
OTHER = "another-key-fedcba9876"


def test_keys_come_from_flags_files_and_the_environment_each_once(tmp_path):
    file = tmp_path / "keys.txt"
    file.write_text(f"# the team's keys\n\n{OTHER}\n  {KEY}  \n")
    keys = read_keys([KEY], [file], environ={ENV: f"{OTHER}, env-key-0123456789ab"})
    assert keys == (KEY.encode(), OTHER.encode(), b"env-key-0123456789ab")
    assert read_keys([], [], environ={}) == ()


@pytest.mark.parametrize(
    "keys, text, fragments",
    [
        (["short"], None, ["--api-key", "at least 16 characters"]),
        ([], "ok-key-0123456789abcdef\nsecret key with spaces\n", ["line 2", "visible ASCII"]),
        ([], "# only a comment\n", ["holds no key"]),
    ],
)
def test_a_bad_key_is_one_line_naming_where_it_came_from_never_the_key(tmp_path, keys, text, fragments):
    files = []
    if text is not None:
        files = [tmp_path / "keys.txt"]
        files[0].write_text(text)
    with pytest.raises(ConfigError) as e:
        read_keys(keys, files, environ={})
    message = str(e.value)
    assert all(f in message for f in fragments), message
    assert "short" not in message.replace("--api-key", "") and "secret" not in message
    with pytest.raises(ConfigError, match="cannot read it"):
        read_keys([], [tmp_path / "missing.txt"], environ={})


def test_the_check_compares_every_key_and_reads_only_a_bearer_token():
    keys = (KEY.encode(), OTHER.encode())
    assert accepted(KEY.encode(), keys) == 0 and accepted(OTHER.encode(), keys) == 1
    assert accepted(KEY[:-1].encode(), keys) is None
    assert bearer([(b"Authorization", b"Bearer  abc ")]) == b"abc"
    assert bearer([(b"authorization", b"Basic abc")]) is None and bearer([]) is None


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory)


def test_with_keys_every_request_but_liveness_needs_one(ckpt):
    app = create_app(load_models([str(ckpt)], device="cpu"), api_keys=(KEY.encode(), OTHER.encode()))
    with TestClient(app) as c:
        for path in ("/health", "/", "/docs", "/openapi.json"):
            assert c.get(path).status_code == 200, path
        body = {"text": "Ein Hund läuft."}
        missing = c.post("/v1/translate", json=body)
        wrong = c.post("/v1/translate", json=body, headers={"Authorization": "Bearer wrong-key-0123456789"})
        for answer, reason in ((missing, "needs an API key"), (wrong, "not one this server accepts")):
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
            assert reason in answer.json()["error"] and "wrong-key" not in answer.text
            assert len(answer.json()["error"].splitlines()) == 1
        assert c.get("/v1/models").status_code == 401
        for key in (KEY, OTHER):
            good = c.post("/v1/translate", json=body, headers={"Authorization": f"Bearer {key}"})
            assert good.status_code == 200 and len(good.json()["translations"]) == 1, good.text
        # the schema says what a client must send
        assert "401" in c.get("/openapi.json").json()["paths"]["/v1/translate"]["post"]["responses"]
    with TestClient(create_app(load_models([str(ckpt)], device="cpu"))) as c:  # no keys: open
        assert c.post("/v1/translate", json=body).status_code == 200


def test_a_key_past_its_limits_gets_429_with_retry_after_and_another_key_is_not_held_back(ckpt):

    from attnkit.serve.keys import Quota

    quota = Quota(max_requests=1, max_tokens=12)
    app = create_app(
        load_models([str(ckpt)], device="cpu"), api_keys=(KEY.encode(), OTHER.encode()), quota=quota
    )
    mine, theirs = ({"Authorization": f"Bearer {k}"} for k in (KEY, OTHER))
    with TestClient(app) as c:
        many = {"text": ["Ein Hund läuft im Schnee ."] * 4}  # more source tokens than 12
        over = c.post("/v1/translate", json=many, headers=mine)
        assert over.status_code == 429 and over.headers["retry-after"] == "1", over.text
        assert "over the limit of 12" in over.json()["error"]
        assert c.post("/v1/translate", json={"text": "Ein Hund ."}, headers=mine).status_code == 200
        assert quota.tokens[0] == 0 and quota.requests[0] == 0  # given back when answered
        # a request in flight: the same key's next one waits its turn, another key's does not
        quota.admit(0)
        busy = c.post("/v1/translate", json={"text": "Ein Hund ."}, headers=mine)
        assert busy.status_code == 429 and "in flight" in busy.json()["error"], busy.text
        assert c.post("/v1/translate", json={"text": "Ein Hund ."}, headers=theirs).status_code == 200
        quota.leave(0)
    # without keys the limits hold for all requests together
    quota = Quota(max_requests=1)
    with TestClient(create_app(load_models([str(ckpt)], device="cpu"), quota=quota)) as c:
        assert c.post("/v1/translate", json={"text": "Ein Hund ."}).status_code == 200
        quota.admit(-1)
        assert c.post("/v1/translate", json={"text": "Ein Hund ."}).status_code == 429
        assert c.get("/health").status_code == 200  # liveness is never held back


def test_serve_refuses_a_bad_key_before_loading_anything(ckpt):
    code, _, err = cli("serve", "--checkpoint", ckpt, "--api-key", "short", "--port", "1")
    assert_user_error(code, err, "--api-key", "at least 16 characters")


def get(url: str, key: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.slow
def test_a_served_page_asks_for_the_key_once_then_translates(ckpt, tmp_path_factory, driver):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser = driver
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(KEY + "\n")
    with live_server(ckpt, extra=("--api-key-file", str(keys))) as (url, proc):
        banner = proc.stdout.readline().decode()
        assert "1 API key(s) accepted" in banner and KEY not in banner, banner
        assert get(url + "/v1/models")[0] == 401 and get(url + "/v1/models", KEY)[0] == 200
        browser.get(url + "/")
        WebDriverWait(browser, 30).until(expected_conditions.alert_is_present())
        prompt = browser.switch_to.alert
        prompt.send_keys(KEY)
        prompt.accept()
        _wait(browser, lambda d: d.find_element(By.ID, "status").text == "ready", what="the model list")
        # the key is kept for the tab: the page opens again without asking, and translates
        translate_on_the_page(browser, url)
        assert browser.find_element(By.ID, "view").is_displayed()
