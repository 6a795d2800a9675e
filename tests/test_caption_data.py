"""The captioner's data: the generated shapes corpus (reproducible, its captions true to its pictures),
image reading (a bad image is one line naming it), the TSV reader, and the Hugging Face importer
against a local fake dataset (no network)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from attnkit.data.config import DataConfig
from attnkit.errors import ConfigError, DataError
from attnkit.tasks.captioning import hf_import, load_captions, make_shapes, read_image, shapes
from attnkit.tasks.captioning.corpus import reference_streams, references
from attnkit.tasks.captioning.shapes import COLOURS, draw_scene, split_rng
from cli_helpers import assert_user_error, cli


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
    return h.hexdigest()


def test_the_same_seed_writes_the_same_corpus_and_splits_do_not_move_each_other(tmp_path):
    a = make_shapes(tmp_path / "a", n_train=12, n_valid=4, n_test=3, seed=5)
    make_shapes(tmp_path / "b", n_train=12, n_valid=4, n_test=3, seed=5)
    make_shapes(tmp_path / "c", n_train=12, n_valid=4, n_test=3, seed=6)
    make_shapes(tmp_path / "d", n_train=20, n_valid=4, n_test=3, seed=5)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert a["train"].read_text() != (tmp_path / "c" / "train.tsv").read_text()
    assert a["valid"].read_text() == (tmp_path / "d" / "valid.tsv").read_text()  # more training images only
    lines = a["train"].read_text().splitlines()
    assert len(lines) == 12 and all(line.startswith("images/train_") and "\t" in line for line in lines)


def test_every_caption_says_what_its_picture_shows():
    """Each named object is drawn in its colour at its box, and the relation matches the boxes."""
    rng = split_rng(3, "train")
    relations = set()
    for _ in range(60):
        scene, img = draw_scene(rng, 32)
        pixels = np.asarray(img)
        a, b = scene.objects
        for obj in (a, b):
            x0, y0, x1, y1 = obj.box
            centre = pixels[(y0 + y1) // 2 + 1, (x0 + x1) // 2]  # a triangle's centre row is inside too
            assert tuple(centre) == COLOURS[obj.colour], (scene.caption, obj)
        ax, ay = (a.box[0] + a.box[2]) / 2, (a.box[1] + a.box[3]) / 2
        bx, by = (b.box[0] + b.box[2]) / 2, (b.box[1] + b.box[3]) / 2
        want = {"above": ay < by, "below": ay > by, "left of": ax < bx, "right of": ax > bx}
        assert want[scene.relation], scene.caption
        colours = list(COLOURS)
        assert colours.index(a.colour) <= colours.index(b.colour)  # one caption per picture
        assert scene.caption == f"a {a.colour} {a.shape} {scene.relation} a {b.colour} {b.shape}"
        relations.add(scene.relation)
    assert relations == {"above", "below", "left of", "right of"}


def png(mode: str, size=(8, 8), fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size).save(buf, format=fmt)
    return buf.getvalue()


def cut_png() -> bytes:
    """A PNG of noise, its last third cut off: the header reads, the pixels do not."""
    noise = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, format="PNG")
    data = buf.getvalue()
    return data[: 2 * len(data) // 3]


def test_images_are_read_at_the_model_size_in_rgb_or_grey():
    x = read_image(png("P", (20, 10)), size=16)
    assert x.shape == (3, 16, 16) and x.dtype == torch.uint8
    assert read_image(png("L"), size=8, channels=1).shape == (1, 8, 8)


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"GIF89 this is text", "not an image"),
        (cut_png(), "damaged or truncated"),
        (png("I;16"), "pixel mode I;16"),
        (png("CMYK", fmt="JPEG"), "pixel mode CMYK"),
        (png("RGB", (3000, 3000)), "too large"),
    ],
)
def test_a_bad_image_is_one_line_naming_it(data, fragment):
    with pytest.raises(DataError) as e:
        read_image(data, size=8, name="upload.png", max_pixels=4_000_000)
    assert fragment in str(e.value) and "upload.png" in str(e.value) and "\n" not in str(e.value)


def test_a_file_over_the_byte_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.png"
    path.write_bytes(png("RGB"))
    with pytest.raises(DataError, match="too large"):
        read_image(path, size=8, max_bytes=10)
    with pytest.raises(DataError, match="no such image"):
        read_image(tmp_path / "missing.png", size=8)


def test_captions_resolve_images_against_their_tsv_and_group_as_references(tmp_path):
    make_shapes(tmp_path / "s", n_train=3, n_valid=2, n_test=0)
    extra = (tmp_path / "s" / "train.tsv").read_text().splitlines()[0].split("\t")[0]
    with (tmp_path / "s" / "train.tsv").open("a") as f:
        f.write(f"{extra}\tanother caption\n")  # a second reference of the first image
    data = DataConfig(
        corpus="tsv",
        train_files=[str(tmp_path / "s" / "train.tsv")],
        valid_files=[str(tmp_path / "s" / "valid.tsv")],
    )
    records = load_captions(data, "train")
    assert len(records) == 4 and all(Path(r.image).is_file() for r in records)
    images, refs = references(records)
    assert len(images) == 3 and refs[0][1] == "another caption" and len(refs[1]) == 1
    streams = reference_streams(refs)
    assert streams[1] == ["another caption", refs[1][0], refs[2][0]]  # a shorter list repeats its first


def test_hf_import_writes_the_same_format_from_a_local_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    pictures = [Image.new("RGB", (10 + i, 12), (40 * i, 0, 0)) for i in range(5)]
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "caption": datasets.Sequence(datasets.Value("string")),
            "split": datasets.Value("string"),
        }
    )
    rows = {
        "image": pictures,
        "caption": [[f"picture {i}", f"image\tnumber {i}"] for i in range(5)],
        "split": ["train", "train", "val", "test", "train"],
    }
    datasets.DatasetDict({"test": datasets.Dataset.from_dict(rows, features=features)}).save_to_disk(
        tmp_path / "hf"
    )

    from attnkit.cli import main

    code = main(
        [
            "import-captions",
            "--dataset",
            str(tmp_path / "hf"),
            "--out",
            str(tmp_path / "out"),
            "--hf-split",
            "test",
            "--split-field",
            "split",
            "--splits",
            "train=train,valid=val,test=test",
            "--size",
            "16",
        ]
    )
    assert code == 0
    train = (tmp_path / "out" / "train.tsv").read_text().splitlines()
    assert [line.split("\t")[1] for line in train[:2]] == ["picture 0", "image number 0"]
    assert len(train) == 6 and len((tmp_path / "out" / "valid.tsv").read_text().splitlines()) == 2
    image = tmp_path / "out" / train[0].split("\t")[0]
    assert Image.open(image).size == (16, 16)
    data = DataConfig(
        corpus="tsv",
        train_files=[str(tmp_path / "out" / "train.tsv")],
        valid_files=[str(tmp_path / "out" / "valid.tsv")],
    )
    assert references(load_captions(data, "valid"))[1] == [["picture 2", "image number 2"]]


def test_objects_file_lists_each_images_boxes_in_caption_order(tmp_path):
    make_shapes(tmp_path, n_train=2, n_valid=1, n_test=1)
    rows = [json.loads(line) for line in (tmp_path / "train.objects.jsonl").read_text().splitlines()]
    captions = [line.split("\t")[1] for line in (tmp_path / "train.tsv").read_text().splitlines()]
    for row, caption in zip(rows, captions, strict=True):
        first, second = row["objects"]
        assert caption.startswith(f"a {first['colour']} {first['shape']}")
        assert caption.endswith(f"a {second['colour']} {second['shape']}") and len(first["box"]) == 4


def test_make_shapes_refuses_a_non_empty_out_and_overwrite_replaces_it_only_once_done(tmp_path, capsys):
    out = tmp_path / "corpus"
    out.mkdir()
    (out / "mine.txt").write_text("the user's")
    code, _, err = cli(capsys, "make-shapes", "--out", out, "--train", "2", "--valid", "1", "--test", "1")
    assert_user_error(code, err, str(out), "is not empty", "--overwrite")
    code, _, err = cli(capsys, "make-shapes", "--out", out, "--train", "2", "--valid", "1", "--overwrite")
    assert_user_error(code, err, "did not write (mine.txt)")
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]

    (out / "mine.txt").unlink()
    code, text, err = cli(capsys, "make-shapes", "--out", out, "--train", "4", "--valid", "2", "--test", "1")
    assert code == 0 and "(4 images)" in text and "(1 image)" in text, err
    before = digest(out)
    with pytest.MonkeyPatch.context() as mp:  # the new corpus fails half-way: the old one stays whole
        mp.setattr(shapes, "draw_scene", fail_after(3, draw_scene))
        with pytest.raises(RuntimeError, match="disk on fire"):
            make_shapes(out, n_train=2, n_valid=1, n_test=1, overwrite=True)
    assert digest(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]
    code, _, err = cli(
        capsys, "make-shapes", "--out", out, "--train", "2", "--valid", "1", "--test", "1", "--overwrite"
    )
    assert code == 0, err
    assert len(list((out / "images").iterdir())) == 2 + 1 + 1  # no stale train_00002.png
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def fail_after(n: int, fn):
    calls = iter(range(n + 1))

    def wrapped(*args, **kwargs):
        if next(calls) == n:
            raise RuntimeError("disk on fire")
        return fn(*args, **kwargs)

    return wrapped


def test_make_shapes_refuses_counts_below_one_image(tmp_path, capsys):
    code, _, err = cli(capsys, "make-shapes", "--out", tmp_path / "a", "--test", "0")
    assert code == 2 and "--test" in err
    with pytest.raises(ConfigError, match="--valid -1"):
        make_shapes(tmp_path / "b", n_valid=-1)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def fake_hub(monkeypatch, bad: dict | None = None):
    """import-captions reads a fake dataset: one good row a split, plus ``bad`` in validation."""
    buf = io.BytesIO()
    Image.new("RGB", (12, 12), (9, 9, 9)).save(buf, format="PNG")
    good = {"image": {"bytes": buf.getvalue(), "path": None}, "caption": "one"}

    def split(name, split, columns):
        if name == "missing":
            raise DataError(f"cannot load Hugging Face dataset {name!r} (no network)")
        return [good, bad] if bad and split == "validation" else [good]

    monkeypatch.setattr(hf_import, "_hf_split", split)


@pytest.mark.parametrize(
    "image, fragment",
    [
        ({"bytes": cut_png(), "path": None}, "damaged or unreadable"),
        ({"bytes": None, "path": "/nonexistent/x.jpg"}, "No such file"),
        ({"bytes": png("RGB", (300, 300)), "path": None}, "decompression bomb"),
    ],
)
def test_import_captions_leaves_out_as_it_was_when_a_later_split_fails(
    tmp_path, capsys, monkeypatch, image, fragment
):
    out = tmp_path / "corpus"
    fake_hub(monkeypatch)
    assert cli(capsys, "import-captions", "--dataset", "fake", "--out", out)[0] == 0
    before = digest(out)
    code, _, err = cli(capsys, "import-captions", "--dataset", "fake", "--out", out)
    assert_user_error(code, err, "is not empty", "--overwrite")

    fake_hub(monkeypatch, bad={"image": image, "caption": "two"})
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 40_000)  # 300 x 300 is over twice that: a bomb
    code, _, err = cli(capsys, "import-captions", "--dataset", "fake", "--out", out, "--overwrite")
    assert_user_error(code, err, "fake valid row 2", fragment)
    assert digest(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]

    code, _, err = cli(capsys, "import-captions", "--dataset", "missing", "--out", tmp_path / "new")
    assert_user_error(code, err, "cannot load")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]  # nothing made before the load
