"""``attnkit export``: success output and one-line errors (exit 2) for every bad input."""

from __future__ import annotations

import pytest
import torch

from attnkit.checkpoint import save_checkpoint
from attnkit.cli import main
from export_helpers import require, trained_checkpoint


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


@pytest.fixture(scope="module")
def ckpt():
    require("ctranslate2", "transformers", "safetensors")
    return trained_checkpoint()


def test_export_writes_and_refuses_to_overwrite_without_force(ckpt, tmp_path, capsys):
    out = tmp_path / "ct2"
    code, stdout, _ = _run(capsys, "export", "--checkpoint", ckpt, "--format", "ctranslate2", "--output", out)
    assert code == 0 and "wrote ctranslate2" in stdout and (out / "model.bin").is_file()
    first = (out / "model.bin").read_bytes()
    code, _, err = _run(capsys, "export", "--checkpoint", ckpt, "--format", "ctranslate2", "--output", out)
    _one_line_error(code, err, "already exists", "--force")
    code, *_ = _run(
        capsys,
        "export",
        "--checkpoint",
        ckpt,
        "--format",
        "ctranslate2",
        "--output",
        out,
        "--quantization",
        "int8",
        "--force",
    )
    assert code == 0 and (out / "model.bin").read_bytes() != first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "a temporary folder was left behind"


def test_failed_export_keeps_the_old_folder(ckpt, tmp_path, capsys):
    out = tmp_path / "hf"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    pre = _pre_norm_checkpoint(tmp_path)
    code, _, err = _run(
        capsys, "export", "--checkpoint", pre, "--format", "huggingface", "--output", out, "--force"
    )
    _one_line_error(code, err, "pre-norm")
    assert (out / "keep.txt").read_text() == "mine"


def test_unknown_format_is_a_usage_error(ckpt, tmp_path, capsys):
    code, _, err = _run(
        capsys, "export", "--checkpoint", ckpt, "--format", "onnx", "--output", tmp_path / "x"
    )
    _one_line_error(code, err, "onnx")


def test_rnn_checkpoint_is_refused(tmp_path, capsys, ckpt):
    from attnkit.checkpoint import load_checkpoint
    from attnkit.model import RNNConfig, RNNSeq2Seq

    state = load_checkpoint(ckpt)
    cfg = RNNConfig.preset("tiny", src_vocab_size=600, tgt_vocab_size=600)
    rnn = tmp_path / "rnn.pt"
    save_checkpoint(
        {
            "arch": "rnn",
            "model_config": cfg.to_dict(),
            "tokenizer": state["tokenizer"],
            "model": RNNSeq2Seq(cfg).state_dict(),
        },
        rnn,
    )
    code, _, err = _run(
        capsys, "export", "--checkpoint", rnn, "--format", "ctranslate2", "--output", tmp_path / "o"
    )
    _one_line_error(code, err, "'rnn'", "Transformer")


def test_missing_or_corrupt_checkpoint(tmp_path, capsys, ckpt):
    code, _, err = _run(
        capsys,
        "export",
        "--checkpoint",
        tmp_path / "no.pt",
        "--format",
        "huggingface",
        "--output",
        tmp_path / "o",
    )
    _one_line_error(code, err, "not found")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    code, _, err = _run(
        capsys, "export", "--checkpoint", bad, "--format", "ctranslate2", "--output", tmp_path / "o"
    )
    _one_line_error(code, err, "bad.pt")


def _pre_norm_checkpoint(folder):
    from attnkit.checkpoint import load_checkpoint
    from attnkit.model import Transformer, TransformerConfig

    state = load_checkpoint(trained_checkpoint())
    cfg = TransformerConfig.from_dict(state["model_config"]).replace(norm="pre")
    torch.manual_seed(0)
    path = folder / "pre.pt"
    save_checkpoint(
        {
            "arch": "transformer",
            "model_config": cfg.to_dict(),
            "tokenizer": state["tokenizer"],
            "model": Transformer(cfg).state_dict(),
        },
        path,
    )
    return path


@pytest.mark.parametrize("fmt", ["huggingface"])
@pytest.mark.parametrize("positional", ["relative", "rotary"])
def test_positions_inside_attention_are_refused(ckpt, tmp_path, capsys, fmt, positional):
    """MarianMTModel has no relative or rotary self-attention: one line, exit 2, nothing written
    (CTranslate2 converts both: tests/test_export_positions.py)."""
    from export_helpers import variant_checkpoint

    extra = {"relative_values": True} if positional == "relative" else {}
    path = variant_checkpoint(f"{positional}-cli", positional=positional, **extra)
    out = tmp_path / "out"
    code, _, err = _run(capsys, "export", "--checkpoint", path, "--format", fmt, "--output", out)
    _one_line_error(code, err, positional, "model.positional")
    assert not out.exists() and not list(tmp_path.iterdir())


def test_learned_positions_are_refused_by_huggingface_only(ckpt, tmp_path, capsys):
    from export_helpers import variant_checkpoint

    path = variant_checkpoint("learned-cli", positional="learned")
    code, _, err = _run(
        capsys, "export", "--checkpoint", path, "--format", "huggingface", "--output", tmp_path / "hf"
    )
    _one_line_error(code, err, "'learned'")
    code, out, _ = _run(
        capsys, "export", "--checkpoint", path, "--format", "ctranslate2", "--output", tmp_path / "ct2"
    )
    assert code == 0 and "wrote ctranslate2" in out


def test_export_says_each_stage_with_its_pace(ckpt, tmp_path, capsys):
    out = tmp_path / "hf"
    code, _, err = _run(capsys, "export", "--checkpoint", ckpt, "--format", "huggingface", "--output", out)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("export: ")]
    assert [line.split(" (")[0] for line in lines] == [
        f"export: read {ckpt}",
        "export: converted to huggingface",
        f"export: wrote {out}",
    ], err
    assert "stage/s" in lines[0] and "left" in lines[0] and "left" not in lines[-1], err
