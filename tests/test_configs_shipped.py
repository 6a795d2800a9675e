"""The shipped configs are package data: named from any directory, extended by a user's config, listed
by ``attnkit configs`` (inside the wheel: ``tests/test_wheel.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnkit.errors import ConfigError
from attnkit.train import load_config
from attnkit.train.shipped import shipped
from fault_helpers import cli

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "attnkit"


def test_a_shipped_config_is_named_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    by_name = load_config("multi30k_de_en_tiny")
    assert by_name == load_config(PACKAGE / "configs" / "multi30k_de_en_tiny.yaml")
    assert load_config("multi30k_de_en_tiny.yaml") == by_name
    with pytest.raises(ConfigError, match="attnkit configs lists them"):
        load_config("multi30k_de_en_tinyy")


def test_a_config_extends_a_shipped_one(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: multi30k_de_en_tiny\ntrain: {max_steps: 5}\n")
    cfg, base = load_config(mine), load_config("multi30k_de_en_tiny")
    assert cfg.train.max_steps == 5
    assert cfg.train.lr == base.train.lr and cfg.model == base.model and cfg.data == base.data
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "a.yaml")


def test_configs_lists_every_shipped_config():
    code, out, err = cli("configs")
    assert code == 0, err
    names = [line.split()[0] for line in out.splitlines()]
    assert names == sorted(p.stem for p in (PACKAGE / "configs").glob("*.yaml")) == sorted(shipped())
    assert all(len(line.split(None, 1)) == 2 for line in out.splitlines())  # each says what it trains
