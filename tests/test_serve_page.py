"""The attention page in a real browser: Debian's headless Chromium driven by Selenium.

Skipped (with the reason) where Chromium or chromedriver is missing, unless CI=true: there they
must run. Start the server, type a sentence, translate, check the layers x heads grids, click a
map, hover a cell and compare the value shown with the API's tensor; the same for the static file
``attnkit attention --html`` writes. A captioner: upload an image, check the caption, one panel per
piece, layer and head switching, and a hovered region's value against ``/v1/caption``'s tensor.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from attnkit.cli import main
from serve_helpers import live_server, post, post_bytes, tiny_checkpoint

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SENTENCE = "Kannst du mir helfen, diesen Satz zu übersetzen?"
CAPTION = "Ein Mann fährt mit dem Fahrrad eine Straße entlang."
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.is_file() or not os.access(path, os.X_OK):
            return f"{path} not found (apt-get install -y chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    missing = _browser_missing()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the browser test cannot run: {missing}")
        pytest.skip(f"browser test skipped: {missing}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1100",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    d.set_page_load_timeout(60)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.set_num_threads(1)
    return tiny_checkpoint(tmp_path_factory)


@pytest.fixture(scope="module")
def captioner(tmp_path_factory):
    """A captioner trained 20 steps on 120 generated shapes pictures (~3 s): the page is checked
    against the API, not the captions' quality. Returns (checkpoint, a test image)."""
    from attnkit.tasks.captioning import make_shapes
    from attnkit.train import load_config, train

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("page_captioner")
    make_shapes(root / "data", n_train=120, n_valid=4, n_test=2, seed=1)
    overrides = [
        "data.corpus=tsv",
        *(f"data.{s}_files=[{root}/data/{s}.tsv]" for s in ("train", "valid", "test")),
        "tokenizer.vocab_size=60",
        "tokenizer.model_type=bpe",
        "model.arch=captioner",
        "model.preset=tiny",  # 32x32 images, an 8x8 grid of regions, 2 decoder layers x 4 heads
        "train.max_steps=20",
        "train.max_tokens=2048",
        "train.schedule=inverse_sqrt",
        "train.lr=0.01",
        "train.warmup_steps=5",
        "train.progress=false",
        "train.tensorboard=false",
        "valid.every=20",
        "valid.beam_size=1",
        "valid.keep_last=1",
        f"output_dir={root}/run",
    ]
    result = train(load_config(None, overrides), log=lambda m: None)
    return result.last_checkpoint, root / "data" / "images" / "test_00001.png"


@pytest.fixture(scope="module")
def caption_server(captioner):
    """One server of the captioner for the page and for the API's answers to compare with."""
    with live_server(captioner[0]) as (url, _):
        yield url


def _wait(driver, condition, timeout: float = 90, what: str = "the page"):
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(lambda d: condition(d))
    except Exception:
        status = driver.execute_script("return document.getElementById('status').textContent")
        raise AssertionError(f"timed out waiting for {what} (status line: {status!r})") from None


def _check_view(driver, data: dict, tmp_path: Path) -> None:
    """Grids, zoom with hover value, toggles, line view: against the API's payload ``data``."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    for kind, spec in data["attention"].items():
        cells = driver.find_elements(By.CSS_SELECTOR, f'.cell[data-kind="{kind}"]')
        assert len(cells) == spec["layers"] * spec["heads"], kind
    cross = data["attention"]["cross"]
    layer, head = cross["layers"] - 1, cross["heads"] - 1
    driver.find_element(
        By.CSS_SELECTOR, f'.cell[data-kind="cross"][data-layer="{layer}"][data-head="{head}"]'
    ).click()
    zoom = driver.find_element(By.ID, "zoom")
    geo = {k: float(zoom.get_attribute(f"data-{k}")) for k in ("left", "top", "size", "rows", "cols")}
    assert (zoom.get_attribute("data-kind"), int(geo["rows"]), int(geo["cols"])) == (
        "cross",
        len(data["sequences"]["tgt"]["pieces"]),
        len(data["sequences"]["src"]["pieces"]),
    )
    r, c = min(int(geo["rows"]) // 2, 3), int(geo["cols"]) - 1  # near the top: inside the window
    x = geo["left"] + (c + 0.5) * geo["size"] - zoom.size["width"] / 2  # offsets from the centre
    y = geo["top"] + (r + 0.5) * geo["size"] - zoom.size["height"] / 2
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", zoom)
    ActionChains(driver).move_to_element_with_offset(zoom, int(x), int(y)).perform()
    tip = driver.find_element(By.ID, "tooltip")
    _wait(driver, lambda d: tip.is_displayed(), 10, "the hover value")
    assert (int(tip.get_attribute("data-row")), int(tip.get_attribute("data-col"))) == (r, c)
    assert float(tip.get_attribute("data-value")) == pytest.approx(
        cross["weights"][layer][head][r][c], abs=5e-4
    )
    assert tip.text.endswith(tip.get_attribute("data-value"))
    assert len(driver.find_elements(By.CSS_SELECTOR, "#lines line")) > 0

    driver.find_element(By.CSS_SELECTOR, '[data-units="words"]').click()
    assert int(driver.find_element(By.ID, "zoom").get_attribute("data-rows")) == len(
        data["sequences"]["tgt"]["words"]
    )
    driver.find_element(By.ID, "hide-special").click()  # hides </s> among the rows
    assert (
        int(driver.find_element(By.ID, "zoom").get_attribute("data-rows"))
        == len(data["sequences"]["tgt"]["words"]) - 1
    )
    driver.find_element(By.CSS_SELECTOR, '[data-heads="mean"]').click()
    assert len(driver.find_elements(By.CSS_SELECTOR, '.cell[data-kind="cross"]')) == cross["layers"]
    driver.save_screenshot(str(tmp_path / "page.png"))
    assert (tmp_path / "page.png").read_bytes()[:8] == PNG_MAGIC
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def translate_on_the_page(driver, url: str) -> None:
    """Open the served page, type SENTENCE, translate it greedily and wait for its attention view."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver.get(url + "/")
    _wait(driver, lambda d: d.find_element(By.ID, "status").text == "ready", what="the model list")
    box = driver.find_element(By.ID, "text")
    box.clear()
    box.send_keys(SENTENCE)
    Select(driver.find_element(By.ID, "search")).select_by_visible_text("greedy")
    driver.find_element(By.ID, "go").click()
    _wait(driver, lambda d: d.find_element(By.ID, "view").is_displayed(), what="the attention view")


@pytest.mark.slow
def test_the_page_translates_and_shows_every_layer_and_head(driver, ckpt, tmp_path):
    from selenium.webdriver.common.by import By

    with live_server(ckpt) as (url, _):
        translate_on_the_page(driver, url)
        status, data = post(url + "/v1/attention", {"text": SENTENCE, "beam": 1})
        assert status == 200
        assert driver.find_element(By.ID, "translation").text == data["translation"]
        _check_view(driver, data, tmp_path)
        # Offline: everything the page loaded came from the server itself.
        resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(r.startswith(url) for r in resources), resources


@pytest.mark.slow
def test_the_page_opens_on_a_caption_and_the_seeds_sentence_is_one_click_away(driver, ckpt):
    """A newcomer first sees an in-domain sentence (Multi30k captions); the seeds' is one click away."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    with live_server(ckpt) as (url, _):
        driver.get(url + "/")
        _wait(driver, lambda d: d.find_element(By.ID, "status").text == "ready", what="the model list")
        assert driver.find_element(By.ID, "text").get_attribute("value") == CAPTION
        Select(driver.find_element(By.ID, "search")).select_by_visible_text("greedy")
        driver.find_element(By.CSS_SELECTOR, f'[data-example="{SENTENCE}"]').click()
        status, data = post(url + "/v1/attention", {"text": SENTENCE, "beam": 1})
        assert status == 200
        _wait(
            driver,
            lambda d: d.find_element(By.ID, "translation").text == data["translation"],
            what="the seeds' sentence translated",
        )
        assert driver.find_element(By.ID, "text").get_attribute("value") == SENTENCE


@pytest.mark.slow
def test_the_static_html_file_shows_the_same_view(driver, ckpt, tmp_path, capsys):
    out = tmp_path / "view.html"
    code = main(
        [
            "attention",
            "--checkpoint",
            str(ckpt),
            "--text",
            SENTENCE,
            "--html",
            str(out),
            "--beam",
            "1",
            "--device",
            "cpu",
        ]
    )
    assert code == 0, capsys.readouterr().err
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "the file must not load anything"
    with live_server(ckpt) as (url, _):  # only to read the API's payload for the same sentence
        status, data = post(url + "/v1/attention", {"text": SENTENCE, "beam": 1})
    assert status == 200
    driver.get(out.as_uri())
    from selenium.webdriver.common.by import By

    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".cell"), what="the embedded view")
    assert driver.find_element(By.ID, "translation").text == data["translation"]
    _check_view(driver, data, tmp_path)


def test_html_needs_text_and_an_output(capsys, ckpt, tmp_path):
    assert main(["attention", "--checkpoint", str(ckpt), "--text", "Hallo"]) == 2
    assert "--output PNG, --html FILE" in capsys.readouterr().err
    assert (
        main(["attention", "--checkpoint", str(ckpt), "--text", " ", "--html", str(tmp_path / "x.html")]) == 2
    )
    assert not (tmp_path / "x.html").exists()
    # each task adds its own flags (attention_command.add_flags): another task's is one line
    out = str(tmp_path / "x.png")
    assert (
        main(["attention", "--checkpoint", str(ckpt), "--text", "Hallo", "--image", out, "--output", out])
        == 2
    )
    said = "--image is for a captioner; a translation model reads --text, --html, --method"
    assert said in capsys.readouterr().err
    assert main(["attention", "--checkpoint", str(ckpt), "--output", out]) == 2
    assert "a translation model needs --text" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def _hover_region(driver, panel_index: int, gr: int, gc: int, grid: list[int]) -> dict:
    """Hover region (gr, gc) of one word's panel; the tooltip's row, column and value."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_elements(By.CSS_SELECTOR, ".panel canvas")[panel_index]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    side = driver.execute_script("return arguments[0].clientWidth", canvas)
    x = (gc + 0.5) * side / grid[1] - side / 2  # offsets from the centre
    y = (gr + 0.5) * side / grid[0] - side / 2
    ActionChains(driver).move_to_element_with_offset(canvas, int(x), int(y)).perform()
    tip = driver.find_element(By.ID, "panel-tooltip")
    _wait(driver, lambda d: tip.is_displayed(), 10, "the hover value")
    assert tip.text.endswith(tip.get_attribute("data-value"))
    return {k: float(tip.get_attribute(f"data-{k}")) for k in ("row", "col", "value")}


def _check_caption_view(driver, data: dict, tmp_path: Path) -> None:
    """Caption, one panel per piece, layer and head switching, the mean of the heads and hidden
    </s>: against ``/v1/caption``'s answer ``data`` for the same image and options."""
    from selenium.webdriver.common.by import By

    pieces, cross = data["sequences"]["tgt"]["pieces"], data["attention"]["cross"]
    grid, weights = cross["grid"], cross["weights"]  # (L, H, T, R)
    assert driver.find_element(By.ID, "result-label").text == "Caption"
    assert driver.find_element(By.ID, "translation").text == data["caption"]
    labels = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".panel figcaption")]
    assert labels == pieces  # one panel per piece, </s> included
    assert len(driver.find_elements(By.CSS_SELECTOR, '.cell[data-kind="cross"]')) == (
        cross["layers"] * cross["heads"]
    )
    assert not driver.find_element(By.ID, "detail").is_displayed()

    def first_panel() -> str:
        return driver.execute_script("return document.querySelector('.panel canvas').toDataURL()")

    drawn = {}
    for layer, head in ((cross["layers"] - 1, cross["heads"] - 1), (0, 0)):
        driver.find_element(
            By.CSS_SELECTOR, f'.cell[data-kind="cross"][data-layer="{layer}"][data-head="{head}"]'
        ).click()
        drawn[layer, head] = first_panel()
        t, gr, gc = len(pieces) // 2, 2, 5
        tip = _hover_region(driver, t, gr, gc, grid)
        region = gr * grid[1] + gc
        assert (tip["row"], tip["col"]) == (t, region)
        assert tip["value"] == pytest.approx(weights[layer][head][t][region], abs=5e-4)
    assert len(set(drawn.values())) == 2, "another layer and head must draw another overlay"

    driver.find_element(By.CSS_SELECTOR, '[data-heads="mean"]').click()  # the average of the heads
    assert len(driver.find_elements(By.CSS_SELECTOR, '.cell[data-kind="cross"]')) == cross["layers"]
    tip = _hover_region(driver, 0, 0, 0, grid)
    mean = sum(h[0][0] for h in weights[0]) / cross["heads"]
    assert tip["value"] == pytest.approx(mean, abs=2e-3)  # each head's weight is rounded to 3 places
    driver.find_element(By.ID, "hide-special").click()
    assert len(driver.find_elements(By.CSS_SELECTOR, ".panel")) == len(pieces) - 1  # no </s>
    driver.find_element(By.CSS_SELECTOR, '[data-units="words"]').click()  # a panel per word
    labels = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".panel figcaption")]
    assert labels == data["sequences"]["tgt"]["words"][:-1]
    driver.save_screenshot(str(tmp_path / "captions.png"))
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


@pytest.mark.slow
def test_the_page_captions_an_uploaded_image_one_panel_per_word_and_each_layer_and_head(
    driver, captioner, caption_server, tmp_path
):
    from selenium.webdriver.common.by import By

    image, url = captioner[1], caption_server
    driver.get(url + "/")
    _wait(driver, lambda d: d.find_element(By.ID, "status").text == "ready", what="the model list")
    assert driver.find_element(By.ID, "image-box").is_displayed()
    assert not driver.find_element(By.ID, "text").is_displayed()
    assert driver.find_element(By.ID, "go").text == "Caption"
    driver.find_element(By.ID, "image").send_keys(str(image))
    driver.find_element(By.ID, "go").click()  # the page's default search: beam 4, 4-best
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".panel"), what="the word panels")
    status, data = post_bytes(url + "/v1/caption?beam=4&nbest=4&attention=true", image.read_bytes())
    assert status == 200, data
    nbest = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#nbest li")]  # text, then score
    assert len(nbest) == len(data["nbest"]) and all(
        li.startswith(h["text"]) for li, h in zip(nbest, data["nbest"])
    )
    _check_caption_view(driver, data, tmp_path)

    # A file that is no image: the server's one line, on the page as a translation's error is.
    bad = tmp_path / "notes.txt"
    bad.write_text("plain text, not a picture")
    status, answer = post_bytes(url + "/v1/caption?beam=4&nbest=4&attention=true", bad.read_bytes())
    assert status == 422
    driver.find_element(By.ID, "image").send_keys(str(bad))
    driver.find_element(By.ID, "go").click()
    line = driver.find_element(By.ID, "status")
    _wait(driver, lambda d: line.get_attribute("class") == "error", 30, "the error line")
    assert line.text == answer["error"]
    logged = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]  # and empties the log
    assert all("status of 422" in e["message"] for e in logged), logged  # the refusal, nothing else


@pytest.mark.slow
def test_the_static_html_file_of_a_caption_shows_the_same_panels(
    driver, captioner, caption_server, tmp_path, capsys
):
    from selenium.webdriver.common.by import By

    ckpt, image = captioner
    out = tmp_path / "caption.html"
    argv = ["attention", "--checkpoint", str(ckpt), "--image", str(image), "--html", str(out)]
    assert main([*argv, "--beam", "4", "--device", "cpu"]) == 0, capsys.readouterr().err
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "the file must not load anything"
    status, data = post_bytes(caption_server + "/v1/caption?beam=4&attention=true", image.read_bytes())
    assert status == 200, data
    driver.get(out.as_uri())
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".panel"), what="the embedded panels")
    assert not driver.find_element(By.ID, "image-box").is_displayed()
    _check_caption_view(driver, data, tmp_path)
