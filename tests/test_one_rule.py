"""Rules written once and read the same everywhere: device names, the n-best rule, padding,
pieces back to words, and ``key=value`` overrides anywhere on the command line."""

from __future__ import annotations

import pytest
import torch

from attnkit.cli import parse
from attnkit.data.batching import collate, pad_sequences
from attnkit.data.pieces import words
from attnkit.decoding import check_nbest
from attnkit.device import check_device_name, resolve_device
from attnkit.errors import ConfigError
from attnkit.plugin.flags import device as cli_device
from attnkit.train import load_config

NAMES = ["auto", "cpu", "cuda", "cuda:1", "mps"]
BAD = ["gpu", "cuda:", "cuda:x", "CPU", "", "cpu:0"]


@pytest.mark.parametrize("name", NAMES)
def test_every_device_name_is_read_alike_by_the_library_the_command_line_and_the_config(name):
    assert check_device_name(name) == name == cli_device(name)
    assert load_config(None, [f"train.device={name}"]).train.device == name


@pytest.mark.parametrize("name", BAD)
def test_a_bad_device_name_is_refused_alike_everywhere(name):
    import argparse

    with pytest.raises(ConfigError, match="unknown device"):
        check_device_name(name)
    with pytest.raises(argparse.ArgumentTypeError):
        cli_device(name)
    with pytest.raises(ConfigError, match="device"):
        load_config(None, [f"train.device={name}"])


def test_resolving_a_device_the_machine_lacks_is_a_config_error():
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            resolve_device("cuda:0")


def test_nbest_may_not_exceed_the_beam():
    check_nbest(4, 4)
    for beam, nbest in ((2, 3), (1, 2), (4, 0)):
        with pytest.raises(ConfigError, match=f"nbest {nbest} must be between 1 and the beam size {beam}"):
            check_nbest(beam, nbest)


def test_the_translate_command_refuses_nbest_over_beam_before_loading(capsys, tmp_path):
    from attnkit.cli import main

    code = main(["translate", "--checkpoint", str(tmp_path / "missing.pt"), "--beam", "2", "--nbest", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "nbest 3 must be between 1 and the beam size 2" in err and "missing.pt" not in err


def test_overrides_may_stand_anywhere_after_the_command():
    args = parse(["train", "--config", "c.yaml", "a.b=1", "--output-dir", "D", "c.d=2", "--resume", "r.pt"])
    assert args.overrides == ["a.b=1", "c.d=2"] and args.output_dir == "D" and args.resume == "r.pt"
    with pytest.raises(SystemExit) as stop:
        parse(["train", "--config", "c.yaml", "a.b=1", "--bogus"])
    assert stop.value.code == 2
    with pytest.raises(SystemExit):  # translate takes no overrides (--checkpoint takes several paths)
        parse(["translate", "--checkpoint", "x.pt", "--input", "in.de", "a.b=1"])


def test_one_padding_for_every_batch():
    got = pad_sequences([[5, 6, 7], [8], []], pad_id=0)
    assert got.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]] and got.dtype == torch.long
    batch = collate([([5, 6], [7]), ([8], [9, 10])], pad_id=0, bos_id=1, eos_id=2)
    assert batch.src.tolist() == [[5, 6], [8, 0]]
    assert batch.tgt_in.tolist() == [[1, 7, 0], [1, 9, 10]] and batch.tgt_out.tolist() == [
        [7, 2, 0],
        [9, 10, 2],
    ]
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (3, 5)


def test_pieces_become_words_one_way():
    pieces = ["<s>", "▁Ein", "▁Fahr", "rad", "</s>", "x"]
    assert words(pieces) == (["<s>", "Ein", "Fahrrad", "</s>", "x"], [0, 1, 2, 2, 3, 4])
