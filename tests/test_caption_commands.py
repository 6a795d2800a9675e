"""``attnkit evaluate`` and ``attnkit attention`` on a captioner, quickly (an untrained tiny captioner
on a few generated pictures: what is checked is the commands' plumbing, not the captions), and
``python -m attnkit.cli``."""

from __future__ import annotations

import runpy
import sys

import pytest
import torch

from attnkit.cli import main


@pytest.fixture(scope="module")
def captioner(tmp_path_factory):
    from attnkit.checkpoint import save_checkpoint
    from attnkit.model.captioner import CaptionTransformer
    from attnkit.model.config import CaptionerConfig
    from attnkit.tasks.captioning import make_shapes
    from decoding_helpers import tiny_tokenizer

    root = tmp_path_factory.mktemp("captions")
    make_shapes(root / "data", n_train=4, n_valid=2, n_test=3, seed=1)
    tok = tiny_tokenizer()
    torch.manual_seed(0)
    cfg = CaptionerConfig.preset("tiny", tgt_vocab_size=tok.tgt_vocab_size, max_len=8)  # short captions
    files = {f"{s}_files": [str(root / "data" / f"{s}.tsv")] for s in ("train", "valid", "test")}
    state = {
        "arch": "captioner",
        "model_config": cfg.to_dict(),
        "model": CaptionTransformer(cfg).state_dict(),
        "tokenizer": tok.state_dict(),
        "experiment": {"data": {"corpus": "tsv", **files}},
    }
    return save_checkpoint(state, root / "captioner.pt"), root / "data" / "images" / "test_00000.png"


def test_evaluate_scores_a_captioner_on_its_test_split(captioner, capsys):
    ckpt, _ = captioner
    assert main(["evaluate", "--checkpoint", str(ckpt), "--beam", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "3 images, beam 1" in out and "BLEU" in out and "chrF" in out


def test_attention_draws_a_captioner_s_picture_and_its_heads(captioner, tmp_path):
    ckpt, image = captioner
    out = tmp_path / "caption.png"
    argv = ["attention", "--checkpoint", str(ckpt), "--image", str(image), "--out", str(out), "--beam", "1"]
    assert main([*argv, "--device", "cpu"]) == 0
    for path in (out, tmp_path / "caption_heads.png"):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_python_m_attnkit_cli_is_the_command(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["attnkit", "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("attnkit.cli", run_name="__main__")
    assert done.value.code == 0 and "evaluate" in capsys.readouterr().out


def test_attention_rollout_follows_a_captioner_s_words_through_its_encoder(captioner, tmp_path, capsys):
    from attnkit.attention.rollout import through_encoder
    from attnkit.tasks.captioning import Captioner, caption_attention

    ckpt, image = captioner
    out = tmp_path / "rollout.png"
    argv = ["attention", "--checkpoint", str(ckpt), "--image", str(image), "--out", str(out), "--beam", "1"]
    assert main([*argv, "--method", "rollout", "--device", "cpu"]) == 0, capsys.readouterr().err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    maps = caption_attention(Captioner.from_checkpoint(str(ckpt), device="cpu"), str(image), beam=1)
    assert (
        maps.encoder_self is not None and maps.encoder_self.shape[-1] == maps.cross.shape[-1]
    )  # (L, H, R, R)
    view = through_encoder(maps.cross, maps.encoder_self, "rollout")  # (T, R)
    torch.testing.assert_close(view.sum(-1), torch.ones(view.size(0)))
    assert not torch.allclose(view, maps.cross[-1].mean(0))
