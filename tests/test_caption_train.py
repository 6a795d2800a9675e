"""A tiny captioner trained by the ordinary trainer on the generated shapes corpus (600 steps, one
thread, seeded): it learns the pictures' words, each colour and shape word's attention falls on its
object's box, and ``attnkit caption``, ``attnkit attention``, ``attnkit evaluate`` and
``POST /v1/caption`` serve it; a bad image is one line and exit code 2, or a 4xx."""

from __future__ import annotations

import importlib.util
import io
import json
import re

import pytest
import torch
from PIL import Image

from attnkit.tasks.captioning import Captioner, make_shapes, region_mass
from attnkit.train import load_config, train
from cli_helpers import PNG_MAGIC, cli

STEPS = 600
BOARD = importlib.util.find_spec("tensorboard") is not None  # the tensorboard extra


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("shapes")
    make_shapes(root / "data", n_train=2000, n_valid=50, n_test=100, seed=1)
    overrides = [
        "data.corpus=tsv",
        f"data.train_files=[{root}/data/train.tsv]",
        f"data.valid_files=[{root}/data/valid.tsv]",
        f"data.test_files=[{root}/data/test.tsv]",
        "tokenizer.vocab_size=80",
        "tokenizer.model_type=bpe",
        "model.arch=captioner",
        "model.preset=tiny",  # 32x32 images, 4-pixel patches: 64 regions; d_model 32
        "model.n_encoder_layers=1",
        f"train.max_steps={STEPS}",
        "train.max_tokens=2048",  # 32 images of 64 regions
        "train.schedule=inverse_sqrt",
        "train.lr=0.005",
        "train.warmup_steps=50",
        "train.label_smoothing=0",
        "train.clip_norm=1.0",
        "train.progress=false",
        f"train.tensorboard={BOARD}",  # its attention picture is a translation's: a captioner skips it
        f"valid.every={STEPS}",
        "valid.beam_size=1",
        "valid.keep_last=1",
        f"output_dir={root}/run",
    ]
    result = train(load_config(None, overrides), log=lambda m: None)
    assert not BOARD or any((root / "run" / "tensorboard").iterdir())
    return root, result.last_checkpoint


def objects(root):
    rows = [json.loads(line) for line in (root / "data" / "test.objects.jsonl").read_text().splitlines()]
    refs = [line.split("\t")[1] for line in (root / "data" / "test.tsv").read_text().splitlines()]
    return rows, refs


@pytest.mark.slow
def test_the_captioner_learns_the_pictures_words_and_looks_at_the_object_it_names(run, capsys):
    """Colour and shape words (the two objects' four) are right for >= 85% of test images, and
    each right one puts >= 30% of its attention (last layer, mean over heads) on the regions over
    its object's box, at least twice what looking everywhere alike puts there (~15%)."""
    root, ckpt = run
    captioner = Captioner.from_checkpoint(ckpt, device="cpu")
    rows, refs = objects(root)
    found = captioner.caption([root / "data" / r["image"] for r in rows], beam=1, return_attention=True)
    right = total = 0
    mass, chance = [], []
    R = captioner.model.grid[0] * captioner.model.grid[1]
    for row, ref, cap in zip(rows, refs, found, strict=True):
        words, want = cap.text.split(), ref.split()
        first, second = row["objects"]
        for i, obj in (
            (1, first),
            (2, first),
            (-2, second),
            (-1, second),
        ):  # a COLOUR SHAPE ... a COLOUR SHAPE
            total += 1
            if len(words) >= 5 and words[i] == want[i]:
                right += 1
                assert len(cap.tokens) == len(words), cap.pieces  # attention rows are pieces: one a word
                box = tuple(obj["box"])
                mass.append(region_mass(cap.attention[i % len(words)], box, captioner.model.grid, 32))
                chance.append(region_mass(torch.full((R,), 1 / R), box, captioner.model.grid, 32))
    assert right / total >= 0.85, right / total
    mean_mass, mean_chance = sum(mass) / len(mass), sum(chance) / len(chance)
    assert mean_mass >= 0.3 and mean_mass >= 2 * mean_chance, (mean_mass, mean_chance)

    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt)
    assert code == 0, err
    bleu = float(re.search(r"^BLEU\s+([0-9.]+)", out, flags=re.M).group(1))
    assert bleu >= 60, out  # the README's longer run reaches near 100


def test_caption_command_prints_captions_and_refuses_bad_images_in_one_line(run, capsys, tmp_path):
    root, ckpt = run
    images = [str(root / "data" / "images" / f"test_{i:05d}.png") for i in range(2)]
    want = [c.text for c in Captioner.from_checkpoint(ckpt, device="cpu").caption(images, beam=4)]
    code, out, err = cli(capsys, "caption", "--checkpoint", ckpt, "--image", images[0])
    assert code == 0 and out == want[0] + "\n", err
    code, out, _ = cli(capsys, "caption", "--checkpoint", ckpt, "--image", *images)
    assert out.splitlines() == [f"{p}\t{t}" for p, t in zip(images, want)]
    code, out, _ = cli(capsys, "caption", "--checkpoint", ckpt, "--image", images[0], "--nbest", "2")
    assert code == 0 and len(out.splitlines()) == 2
    code, out, _ = cli(
        capsys,
        "caption",
        "--checkpoint",
        ckpt,
        "--image",
        images[0],
        "--sample",
        "--top-k",
        "3",
        "--seed",
        "4",
    )
    assert code == 0 and out.strip()

    text = tmp_path / "notes.png"
    text.write_text("not a picture")
    grey16 = tmp_path / "deep.png"
    Image.new("I;16", (8, 8)).save(grey16)
    for bad, fragment in (
        (text, "not an image"),
        (grey16, "pixel mode I;16"),
        (tmp_path / "no.png", "no such"),
    ):
        code, out, err = cli(capsys, "caption", "--checkpoint", ckpt, "--image", bad)
        assert code == 2 and out == "" and fragment in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_attention_command_draws_each_words_attention_on_the_image(run, capsys, tmp_path):
    root, ckpt = run
    image = root / "data" / "images" / "test_00000.png"
    out_png = tmp_path / "words.png"
    code, out, err = cli(capsys, "attention", "--checkpoint", ckpt, "--image", image, "--out", out_png)
    assert code == 0, err
    assert out.startswith("caption: a ") and out_png.read_bytes()[:8] == PNG_MAGIC
    assert (tmp_path / "words_heads.png").read_bytes()[:8] == PNG_MAGIC
    code, _, err = cli(capsys, "attention", "--checkpoint", ckpt, "--text", "a red square", "--out", out_png)
    assert code == 2 and "needs --image" in err


def test_the_server_captions_an_uploaded_image_and_answers_bad_ones_with_one_line(run):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from attnkit.plugin.http import Limits
    from attnkit.serve.app import create_app
    from attnkit.serve.tasks import load_models

    root, ckpt = run
    image = (root / "data" / "images" / "test_00001.png").read_bytes()
    want = Captioner.from_checkpoint(ckpt, device="cpu").caption([image], beam=2)[0]
    app = create_app(load_models([f"shapes={ckpt}"], device="cpu"), limits=Limits(max_body_bytes=200_000))
    with TestClient(app) as client:
        r = client.post("/v1/caption?beam=2", content=image, headers={"content-type": "image/png"})
        assert r.status_code == 200, r.text
        assert r.json()["caption"] == want.text and r.json()["model"] == "shapes"
        r = client.post("/v1/caption?beam=1&attention=true", content=image)
        cross = r.json()["attention"]["cross"]
        T = len(r.json()["sequences"]["tgt"]["pieces"])
        assert (
            cross["grid"] == [8, 8]
            and len(cross["weights"][0][0]) == T
            and len(cross["weights"][0][0][0]) == 64
        )

        buf = io.BytesIO()
        Image.new("CMYK", (8, 8)).save(buf, format="JPEG")
        for body, query, status, fragment in (
            (b"plain text", "", 422, "not an image"),
            (buf.getvalue(), "", 422, "pixel mode CMYK"),
            (b"", "", 422, "body is empty"),
            (b"\0" * 300_000, "", 413, "size limit"),
            (image, "?beam=2&nbest=3", 422, "nbest 3"),
            (image, "?colour=red", 422, "unknown field 'colour'"),
            (image, "?beam=two", 422, "beam"),
            (image, "?model=other", 404, "unknown model"),
        ):
            r = client.post(f"/v1/caption{query}", content=body)
            assert r.status_code == status and fragment in r.json()["error"], (query, r.text)
            assert "\n" not in r.json()["error"]
