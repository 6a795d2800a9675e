"""The paper's recipes (configs/wmt14_en_de_{base,big}.yaml) as written: prepared and trained for a few
steps on CPU, on a small synthetic WMT14 folder made of Multi30k captions."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from attnkit.checkpoint import load_checkpoint
from attnkit.data import load_multi30k
from attnkit.data.prepare import prepare
from attnkit.train import load_config, train

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
SPLITS = {"train": ("train", 400), "newstest2013": ("val", 12), "newstest2014": ("test_2016_flickr", 12)}


@pytest.fixture(scope="module")
def wmt14_dir(shared_data, tmp_path_factory):
    """<root>/wmt14_de_en/<split>.{de,en}, as the wmt14 corpus kind reads them."""
    root = tmp_path_factory.mktemp("wmt14")
    (root / "wmt14_de_en").mkdir()
    for split, (m30k, n) in SPLITS.items():
        pairs = load_multi30k(m30k, "de", "en", shared_data, download=False)[:n]
        for k, lang in enumerate(("de", "en")):
            text = "".join(pair[k] + "\n" for pair in pairs)
            (root / "wmt14_de_en" / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return root


@pytest.mark.filterwarnings("ignore:joint corpus too small")  # a 400-pair corpus has no 37k pieces
@pytest.mark.parametrize("name", ["base", "big"])
@pytest.mark.slow
def test_the_papers_config_prepares_and_trains(name, wmt14_dir, tmp_path):
    path = CONFIGS / f"wmt14_en_de_{name}.yaml"
    raw = yaml.safe_load(path.read_text())
    assert raw["model"]["preset"] == name and raw["data"]["corpus"] == "wmt14"
    assert (raw["train"]["beta2"], raw["train"]["eps"], raw["train"]["warmup_steps"]) == (0.98, 1e-9, 4000)
    small = [  # only what a CPU test needs: a short run, small batches, two validation sentences
        f"data.data_dir={wmt14_dir}",
        f"data.prepared={tmp_path / 'prep'}",
        f"output_dir={tmp_path / 'run'}",
        "train.max_steps=1",
        "train.max_tokens=300",
        "train.progress=false",
        "valid.every=1",
        "valid.max_sentences=2",
    ]
    cfg = load_config(path, small)
    manifest = prepare(cfg, cfg.data.prepared, workers=2, log=lambda m: None)
    assert manifest["splits"]["train"]["pairs"] > 0 and "test" in manifest["splits"]
    result = train(cfg, log=lambda m: None)
    state = load_checkpoint(result.last_checkpoint)
    d_model = {"base": 512, "big": 1024}[name]
    assert state["step"] == 1 and state["model_config"]["d_model"] == d_model
    assert state["model_config"]["n_encoder_layers"] == state["model_config"]["n_decoder_layers"] == 6
