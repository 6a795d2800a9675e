"""The attention page's followed maps and heads view in a real browser (as tests/test_serve_page.py):
the method buttons swap every kind's layers x heads grid for one rollout or flow map, whose zoomed
values are the API's; flow is asked of the server when it is not in the payload; the heads tables
hold the API's scores, and a click on one shows that head's raw map."""

from __future__ import annotations

import pytest

from attnkit.cli import main
from serve_helpers import live_server, post
from test_serve_page import SENTENCE, _wait, ckpt, driver, translate_on_the_page  # noqa: F401 (fixtures)


def _hover_zoom(browser, r: int, c: int) -> float:
    """The value the zoomed map's tooltip shows for cell (r, c)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    zoom = browser.find_element(By.ID, "zoom")
    geo = {k: float(zoom.get_attribute(f"data-{k}")) for k in ("left", "top", "size")}
    x = geo["left"] + (c + 0.5) * geo["size"] - zoom.size["width"] / 2
    y = geo["top"] + (r + 0.5) * geo["size"] - zoom.size["height"] / 2
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", zoom)
    ActionChains(browser).move_to_element_with_offset(zoom, int(x), int(y)).perform()
    tip = browser.find_element(By.ID, "tooltip")
    _wait(browser, lambda d: tip.is_displayed(), 10, "the hover value")
    assert (int(tip.get_attribute("data-row")), int(tip.get_attribute("data-col"))) == (r, c)
    return float(tip.get_attribute("data-value"))


def _cells(browser, kind: str) -> int:
    from selenium.webdriver.common.by import By

    return len(browser.find_elements(By.CSS_SELECTOR, f'.cell[data-kind="{kind}"]'))


def _check_heads(browser, data: dict) -> None:
    """Every head's importance in the tables is the API's; a click shows its raw map."""
    from selenium.webdriver.common.by import By

    for kind, scores in data["heads"].items():
        cells = browser.find_elements(By.CSS_SELECTOR, f'#heads td[data-kind="{kind}"]')
        values = scores["importance"]
        assert len(cells) == len(values) * len(values[0]), kind
        for td in cells:
            layer, head = int(td.get_attribute("data-layer")), int(td.get_attribute("data-head"))
            assert float(td.get_attribute("data-value")) == pytest.approx(
                values[layer][head], rel=1e-3, abs=1e-6
            )
    td = browser.find_element(By.CSS_SELECTOR, '#heads td[data-kind="cross"][data-layer="1"][data-head="2"]')
    td.click()
    assert browser.find_element(By.CSS_SELECTOR, '[data-method="raw"]').get_attribute("class") == "on"
    zoom = browser.find_element(By.ID, "zoom")
    assert (
        zoom.get_attribute("data-kind"),
        zoom.get_attribute("data-layer"),
        zoom.get_attribute("data-head"),
    ) == (
        "cross",
        "1",
        "2",
    )
    assert _hover_zoom(browser, 0, 0) == pytest.approx(
        data["attention"]["cross"]["weights"][1][2][0][0], abs=5e-4
    )
    browser.find_element(By.CSS_SELECTOR, '[data-score="entropy"]').click()
    first = browser.find_element(By.CSS_SELECTOR, '#heads td[data-kind="encoder_self"]')
    assert float(first.get_attribute("data-value")) == pytest.approx(
        data["heads"]["encoder_self"]["entropy"][0][0], rel=1e-3
    )


@pytest.mark.slow
def test_the_page_follows_attention_down_the_layers_and_scores_its_heads(driver, ckpt, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    with live_server(ckpt) as (url, _):
        translate_on_the_page(driver, url)
        status, data = post(url + "/v1/attention", {"text": SENTENCE, "beam": 1, "flow": True})
        assert status == 200
        assert (
            _cells(driver, "cross")
            == data["attention"]["cross"]["layers"] * data["attention"]["cross"]["heads"]
        )
        driver.find_element(By.CSS_SELECTOR, '[data-method="rollout"]').click()
        assert _cells(driver, "cross") == _cells(driver, "encoder_self") == 1
        driver.find_element(By.CSS_SELECTOR, '.cell[data-kind="encoder_self"]').click()
        assert _hover_zoom(driver, 1, 0) == pytest.approx(
            data["attention"]["encoder_self"]["rollout"][1][0], abs=5e-4
        )
        driver.find_element(By.CSS_SELECTOR, '[data-method="flow"]').click()  # not in the payload: asked for
        _wait(
            driver,
            lambda d: "flow" in d.find_element(By.CSS_SELECTOR, '.kind[data-kind="cross"] h2').text,
            what="the flow maps",
        )
        driver.find_element(By.CSS_SELECTOR, '.cell[data-kind="cross"]').click()
        assert _hover_zoom(driver, 0, 1) == pytest.approx(data["attention"]["cross"]["flow"][0][1], abs=5e-4)
        _check_heads(driver, data)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


@pytest.mark.slow
def test_the_static_file_opens_on_its_method_and_keeps_the_heads_view(driver, ckpt, tmp_path, capsys):  # noqa: F811
    from selenium.webdriver.common.by import By

    out = tmp_path / "view.html"
    argv = ["attention", "--checkpoint", str(ckpt), "--text", SENTENCE, "--html", str(out), "--beam", "1"]
    assert main([*argv, "--method", "flow", "--device", "cpu"]) == 0, capsys.readouterr().err
    with live_server(ckpt) as (url, _):  # only to read the API's payload for the same sentence
        status, data = post(url + "/v1/attention", {"text": SENTENCE, "beam": 1, "flow": True})
    assert status == 200
    driver.get(out.as_uri())
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".cell"), what="the embedded view")
    assert driver.find_element(By.CSS_SELECTOR, '[data-method="flow"]').get_attribute("class") == "on"
    assert _cells(driver, "decoder_self") == 1
    driver.find_element(By.CSS_SELECTOR, '.cell[data-kind="decoder_self"]').click()
    assert _hover_zoom(driver, 2, 1) == pytest.approx(
        data["attention"]["decoder_self"]["flow"][2][1], abs=5e-4
    )
    _check_heads(driver, data)
    # a file written without flow cannot ask for it: the button says which command adds it
    assert main([*argv, "--device", "cpu"]) == 0
    driver.get(out.as_uri())
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".cell"), what="the embedded view")
    assert not driver.find_element(By.CSS_SELECTOR, '[data-method="flow"]').is_enabled()
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
