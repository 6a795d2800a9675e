"""The captioner model: regions from patches, the Transformer's own decoder (cached steps equal
teacher forcing, beam 1 equals greedy, sampling is seeded), its config checks, its registry entry."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch

from attnkit.checkpoint import build_model
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.decoding import SearchOptions
from attnkit.errors import CheckpointError, ConfigError
from attnkit.model.captioner import CaptionTransformer, grid_positions
from attnkit.model.config import CaptionerConfig
from attnkit.model.transformer import TargetDecoder, Transformer
from attnkit.plugin import task_of_arch
from attnkit.tasks.captioning import Captioner
from attnkit.tasks.captioning.captioner import SEARCH
from attnkit.tasks.captioning.images import as_floats

CAPTIONS = [
    f"a {c} {s} {r} a {c2} {s2}"
    for c in ("red", "blue")
    for s in ("square", "circle")
    for r in ("above", "below")
    for c2 in ("green", "yellow")
    for s2 in ("triangle", "circle")
]


def tiny(**overrides) -> CaptionTransformer:
    torch.manual_seed(0)
    return CaptionTransformer(CaptionerConfig.preset("tiny", **overrides)).eval()


def test_regions_are_the_patch_grid_and_memory_has_one_vector_per_region():
    model = tiny(image_size=32, patch_size=8)
    images = torch.rand(3, 3, 32, 32)
    enc = model.encode(images)
    assert model.grid == (4, 4)
    assert enc.memory.shape == (3, 16, 32) and enc.src_mask.shape == (3, 1, 1, 16) and enc.src_mask.all()
    for wrong in ((3, 1, 32, 32), (3, 3, 16, 16), (3, 3, 32, 64), (3, 32, 32)):
        with pytest.raises(ValueError, match=r"images must be \(B, 3, 32, 32\), got shape"):
            model.encode(torch.rand(*wrong))


def test_grid_positions_tell_every_region_apart_by_row_and_column():
    table = grid_positions((4, 4), 32)[0]  # (16, 32)
    assert torch.cdist(table, table).add(torch.eye(16)).min() > 0.1
    assert torch.equal(table[1, :16], table[0, :16]) and not torch.equal(table[1, 16:], table[0, 16:])


def test_the_captioner_and_the_transformer_share_one_decoder():
    assert issubclass(CaptionTransformer, TargetDecoder) and issubclass(Transformer, TargetDecoder)
    assert (
        CaptionTransformer.decode is Transformer.decode
        and CaptionTransformer.init_state is Transformer.init_state
    )


def test_cached_steps_equal_teacher_forcing():
    model = tiny()
    images = torch.rand(2, 3, 32, 32)
    tgt = torch.randint(3, 20, (2, 6))
    full = model(images, tgt)  # (2, 6, V)
    state = model.init_state(model.encode(images))
    steps = torch.cat([model.decode(tgt[:, t : t + 1], state).logits for t in range(6)], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def captioner():
    tok = SubwordTokenizer.train(CAPTIONS, CAPTIONS, vocab_size=40, model_type="bpe")
    torch.manual_seed(0)
    model = CaptionTransformer(CaptionerConfig.preset("tiny", tgt_vocab_size=tok.tgt_vocab_size))
    return Captioner(model, tok, "cpu")


def test_beam_one_is_greedy_and_beam_scores_are_sorted(captioner):
    images = [torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8) for _ in range(3)]
    greedy = captioner.caption(images, beam=1)
    beam1 = captioner.caption(images, beam=1, nbest=1, batch_size=2)
    assert [c.tokens for c in greedy] == [c.tokens for c in beam1]
    for c in captioner.caption(images, beam=4, nbest=3, max_len_b=6):
        scores = [s for _, s in c.nbest]
        assert scores == sorted(scores, reverse=True) and len(c.tokens) <= 5


def test_sampling_is_seeded_and_attention_rows_are_distributions_over_regions(captioner):
    image = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8)
    draw = [captioner.caption([image], nbest=3, sample=True, seed=s)[0].nbest for s in (7, 7)]
    assert draw[0] == draw[1] and len(draw[0]) == 3
    (c,) = captioner.caption([image], beam=2, return_attention=True)
    assert c.attention is not None and c.attention.shape == (len(c.tokens) + 1, 64)
    torch.testing.assert_close(c.attention.sum(-1), torch.ones(len(c.tokens) + 1))


def test_images_in_and_floats_out():
    x = torch.tensor([[[[0, 255]]]], dtype=torch.uint8)
    assert as_floats(x).tolist() == [[[[0.0, 1.0]]]]


@pytest.mark.parametrize(
    "fields, fragment",
    [
        ({"patch_size": 5}, "patch_size"),
        ({"encoder": "vit"}, "encoder"),
        ({"n_encoder_layers": -1}, "n_encoder_layers"),
        ({"encoder": "cnn", "channels": 1}, "channels"),
        ({"encoder": "cnn", "cnn": "vgg"}, "cnn"),
        ({"channels": 4}, "channels = 4: must be 1"),
        ({"channels": 2}, "channels = 2: must be 1"),
    ],
)
def test_config_refuses_what_it_cannot_build(fields, fragment):
    with pytest.raises(ConfigError, match=fragment):
        CaptionerConfig.preset("tiny", **fields)


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None, reason="torchvision is installed")
def test_a_cnn_encoder_without_torchvision_is_one_line():
    with pytest.raises(ConfigError) as e:
        build_model("captioner", CaptionerConfig.preset("tiny", encoder="cnn").to_dict())
    assert "needs torchvision" in str(e.value) and "\n" not in str(e.value)


def test_the_registry_maps_the_captioner_to_the_caption_task():
    task = task_of_arch("captioner")
    assert task.name == "caption" and task.endpoints == ("caption",)
    assert isinstance(build_model("captioner", CaptionerConfig.preset("tiny").to_dict()), CaptionTransformer)


def test_served_attention_is_the_returned_captions_own_under_every_search_option():
    """The server's attention rows belong to the caption it returns (a length penalty or a length
    limit changes the caption), and equal the search's own attention of it."""
    tok = SubwordTokenizer.train(CAPTIONS, CAPTIONS, vocab_size=40, model_type="bpe")
    torch.manual_seed(0)
    config = CaptionerConfig.preset("tiny", tgt_vocab_size=tok.tgt_vocab_size, tie_output=False)
    captioner = Captioner(CaptionTransformer(config), tok, "cpu")  # what the server serves
    image = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    short = captioner.caption([image], beam=4)[0]
    for options in ({"length_penalty": 5.0}, {"max_len_b": 3}):
        (answer,) = captioner.answer([image], SearchOptions.of(SEARCH, beam=4, **options), attention=True)
        (want,) = captioner.caption([image], beam=4, return_attention=True, **options)
        assert want.tokens != short.tokens  # the option changes the caption
        pieces = answer["sequences"]["tgt"]["pieces"]
        weights = torch.tensor(answer["attention"]["cross"]["weights"])  # (L, H, T, R)
        assert answer["caption"] == want.text and pieces == want.pieces and weights.shape[2] == len(pieces)
        torch.testing.assert_close(weights[-1].mean(0), want.attention, atol=2e-3, rtol=0)
        cross = captioner.attention_of(image, want.tokens)  # (L, H, T, R)
        torch.testing.assert_close(cross[-1].mean(0), want.attention, atol=1e-5, rtol=1e-5)


def test_a_run_whose_cnn_started_from_a_weights_file_resumes(monkeypatch):
    """The checkpoint keeps the CNN's weights, not the file's name: resuming with the run's config
    (which names the file) is the same model; another model key still differs."""
    from attnkit.model import captioner as captioner_module
    from attnkit.train import load_config
    from attnkit.train.resume_checks import check_resume

    monkeypatch.setattr(captioner_module, "CNNRegions", captioner_module.PatchRegions)  # no torchvision
    overrides = ["model.arch=captioner", "model.preset=tiny", "model.encoder=cnn", "model.cnn_weights=w.pt"]
    model_cfg = CaptionerConfig.preset("tiny", encoder="cnn", cnn_weights="w.pt")
    saved = {"arch": "captioner", "model_config": CaptionTransformer(model_cfg).config.to_dict()}
    check_resume(saved, load_config(None, overrides), model_cfg, path="ckpt.pt")
    with pytest.raises(CheckpointError, match="model.d_model was 32"):
        check_resume(
            saved, load_config(None, overrides), dataclasses.replace(model_cfg, d_model=64), path="ckpt.pt"
        )


def fake_torchvision(monkeypatch):
    """A torchvision whose resnet18 is a convolution and a BatchNorm (then the two layers the
    captioner drops): enough to build the CNN encoder without the package."""
    import sys
    import types

    def resnet18(weights=None):
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=8),
            torch.nn.BatchNorm2d(8),
            torch.nn.Identity(),
            torch.nn.Identity(),
        )

    monkeypatch.setitem(
        sys.modules, "torchvision", types.SimpleNamespace(models=types.SimpleNamespace(resnet18=resnet18))
    )
    return resnet18


def test_cnn_weights_load_as_they_are_and_a_mismatched_file_is_one_line(monkeypatch, tmp_path):
    """Building the encoder leaves BatchNorm's loaded running statistics untouched (its grid probe runs
    in eval mode) and the CNN in train mode; a state dict of another network is a ConfigError."""
    resnet18 = fake_torchvision(monkeypatch)
    net = resnet18()
    with torch.no_grad():
        net[1].running_mean.fill_(0.5)
        net[1].running_var.fill_(2.0)
    torch.save(net.state_dict(), tmp_path / "w.pt")
    model = CaptionTransformer(
        CaptionerConfig.preset("tiny", encoder="cnn", cnn_weights=str(tmp_path / "w.pt"))
    )
    bn = model.regions.features[1]
    assert model.grid == (4, 4) and bn.training and int(bn.num_batches_tracked) == 0
    assert torch.equal(bn.running_mean, torch.full((8,), 0.5)) and torch.equal(
        bn.running_var, torch.full((8,), 2.0)
    )
    assert model.config.cnn_weights == ""  # the weights are the model's now

    torch.save({"conv.weight": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ConfigError, match="other.pt does not fit torchvision's resnet18") as e:
        CaptionTransformer(
            CaptionerConfig.preset("tiny", encoder="cnn", cnn_weights=str(tmp_path / "other.pt"))
        )
    assert "\n" not in str(e.value)
