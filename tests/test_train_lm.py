"""model.arch: lm through the same trainer: perplexity falls, the best checkpoint is the lowest
perplexity, the checkpoint serves ``attnkit generate``, and resume continues exactly."""

import csv
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.tasks.language_model import LanguageModel
from attnkit.train import load_config, train

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "multi30k" / "train.en.gz").exists(), reason="Multi30k not found")
# An English LM on one side of Multi30k.
TINY_LM = [
    f"data.data_dir={DATA}",
    "data.lang=en",
    "data.max_train_pairs=300",
    "data.max_valid_pairs=30",
    "tokenizer.vocab_size=300",
    "model.arch=lm",
    "model.preset=tiny",
    "model.dropout=0.1",
    "train.max_tokens=800",
    "train.schedule=inverse_sqrt",
    "train.lr=0.003",
    "train.warmup_steps=5",
    "train.label_smoothing=0.0",
    "train.progress=false",
    "train.log_every=5",
    "valid.keep_last=2",
]


def tiny_lm(tmp: Path, *extra: str):
    return load_config(None, [*TINY_LM, f"output_dir={tmp}", *extra])


@needs_data
def test_lm_trains_on_perplexity_and_its_checkpoint_generates(tmp_path):
    torch.set_num_threads(1)
    result = train(tiny_lm(tmp_path, "train.max_steps=30", "valid.every=10"), log=lambda m: None)
    with result.metrics_csv.open() as f:
        ppl = [float(r["val_perplexity"]) for r in csv.DictReader(f) if r.get("val_perplexity")]
    assert len(ppl) == 3 and ppl[-1] < 0.7 * ppl[0]
    best = load_checkpoint(tmp_path / "checkpoint_best.pt")
    assert best["arch"] == "lm" and best["step"] == 10 * (1 + ppl.index(min(ppl)))
    lm = LanguageModel.from_checkpoint(tmp_path / "checkpoint_best.pt", device="cpu")
    (gen,) = lm.generate(["A man"], max_new_tokens=5)
    assert gen[0].text.startswith("A man")


@needs_data
def test_lm_resume_continues_exactly(tmp_path):
    torch.set_num_threads(1)
    straight = train(tiny_lm(tmp_path / "a", "train.max_steps=8", "valid.every=4"), log=lambda m: None)
    half = train(tiny_lm(tmp_path / "b", "train.max_steps=4", "valid.every=4"), log=lambda m: None)
    resumed = train(
        tiny_lm(tmp_path / "b", "train.max_steps=8", "valid.every=4"),
        resume=half.last_checkpoint,
        log=lambda m: None,
    )
    a, b = load_checkpoint(straight.last_checkpoint), load_checkpoint(resumed.last_checkpoint)
    assert a["step"] == b["step"] == 8
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@needs_data
def test_evaluate_an_lm_checkpoint_on_its_test_split(tmp_path, capsys):
    from attnkit.cli import main

    torch.set_num_threads(1)
    train(tiny_lm(tmp_path, "train.max_steps=4", "valid.every=4"), log=lambda m: None)
    assert (
        main(["evaluate", "--checkpoint", str(tmp_path / "checkpoint_best.pt"), "--data-dir", str(DATA)]) == 0
    )
    out = capsys.readouterr().out
    assert "Multi30k test_2016_flickr en" in out and "perplexity" in out and "bits per token" in out


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.slow
def test_lm_on_a_text_corpus_plain_or_gzipped(tmp_path, capsys, gz):
    import gzip

    from cli_helpers import cli

    torch.set_num_threads(1)
    words = ["a dog runs", "the cat sits on the mat", "two men play", "a girl in a red hat", "the dog sleeps"]
    lines = "".join(f"{words[i % 5]} .\n" for i in range(60)).encode()
    paths = {}
    for split in ("train", "valid", "test"):
        paths[split] = tmp_path / (f"{split}.txt.gz" if gz else f"{split}.txt")
        paths[split].write_bytes(gzip.compress(lines) if gz else lines)
    code, out, err = cli(
        capsys,
        "train",
        "--config",
        "configs/multi30k_lm_en.yaml",
        "data.corpus=text",
        "data.lang=",
        *(f"data.{s}_files=[{p}]" for s, p in paths.items()),
        "tokenizer.vocab_size=25",
        "model.preset=tiny",
        "train.max_steps=4",
        "train.progress=false",
        "valid.every=2",
        "--output-dir",
        tmp_path / "run",
    )
    assert code == 0, err
    assert "valid perplexity" in out
    code, out, err = cli(capsys, "evaluate", "--checkpoint", tmp_path / "run" / "checkpoint_best.pt")
    assert code == 0, err
    assert f"{paths['test']}: " in out and "perplexity" in out


def test_an_lm_on_a_parallel_corpus_is_told_to_name_one_language(tmp_path, capsys):
    from cli_helpers import assert_user_error, cli

    code, out, err = cli(
        capsys,
        "train",
        "--config",
        "configs/multi30k_lm_en.yaml",
        "data.lang=",
        "--output-dir",
        tmp_path / "run",
    )
    assert_user_error(code, err, "gives pairs records", "multi30k with data.lang")
