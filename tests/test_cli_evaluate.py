"""``attnkit evaluate``, ``average`` and ``plot-positional`` end to end, and their one-line errors."""

from __future__ import annotations

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.errors import DataError
from attnkit.tasks.translation import Translator, evaluate
from cli_helpers import N_EVAL, SENTENCES, assert_png, assert_user_error, cli

# -- evaluate --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_split_prints_scores_with_signatures(capsys, runs, tmp_path):
    hyp = tmp_path / "hyp.en"
    code, out, err = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        runs.ckpt,
        "--split",
        "test_2016_flickr",
        "--data-dir",
        runs.eval_data,
        "--beam",
        "1",
        "--device",
        "cpu",
        "--hyp-output",
        hyp,
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Multi30k test_2016_flickr de-en, {N_EVAL} sentences, beam 1"
    assert (
        lines[1].startswith("BLEU ") and "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in lines[1]
    )
    assert (
        lines[3].startswith("chrF ") and "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" in lines[3]
    )
    assert "lowercased" not in out
    assert len(hyp.read_text(encoding="utf-8").split("\n")) == N_EVAL + 1


def test_evaluate_files_with_lowercased_bleu(capsys, runs):
    code, out, err = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        runs.ckpt,
        "--src",
        runs.eval_src,
        "--ref",
        runs.eval_ref,
        "--lowercase",
        "--beam",
        "1",
        "--device",
        "cpu",
    )
    assert code == 0, err
    assert out.splitlines()[0] == f"{runs.eval_src} -> {runs.eval_ref}, {N_EVAL} sentences, beam 1"
    (lowercased,) = [line for line in out.splitlines() if line.startswith("BLEU lowercased")]
    assert "case:lc" in lowercased


def test_evaluate_src_needs_ref(capsys, runs):
    result = cli(capsys, "evaluate", "--checkpoint", runs.ckpt, "--src", runs.eval_src)
    assert_user_error(*result[::2], "--src and --ref go together")


def test_evaluate_mismatched_files(capsys, runs, tmp_path):
    short_ref = tmp_path / "short.en"
    short_ref.write_text(
        "".join(runs.eval_ref.read_text(encoding="utf-8").splitlines(True)[:-1]), encoding="utf-8"
    )
    result = cli(capsys, "evaluate", "--checkpoint", runs.ckpt, "--src", runs.eval_src, "--ref", short_ref)
    assert_user_error(*result[::2], "line counts differ", str(short_ref))


def test_evaluate_checks_alignment_before_translating(runs):
    translator = Translator.from_checkpoint(runs.ckpt, device="cpu")
    translator.translate = None  # must not be reached
    with pytest.raises(DataError, match="2 sources but 1 references"):
        evaluate(translator, SENTENCES[:2], ["a dog"])


def test_evaluate_unknown_split(capsys, runs):
    result = cli(
        capsys, "evaluate", "--checkpoint", runs.ckpt, "--split", "dev", "--data-dir", runs.eval_data
    )
    assert_user_error(*result[::2], "'dev'", "train, val, test_2016_flickr")


def _with_experiment(state: dict, path, **data) -> None:
    """Save ``state`` with its experiment's data section replaced (as another run would have saved it)."""
    from attnkit.checkpoint import save_checkpoint

    save_checkpoint({**state, "experiment": {**state["experiment"], "data": data}}, path)


def test_evaluate_loads_the_checkpoint_once(capsys, monkeypatch, runs):
    import attnkit.checkpoint

    calls = []
    real = attnkit.checkpoint.load_checkpoint
    monkeypatch.setattr(attnkit.checkpoint, "load_checkpoint", lambda p: calls.append(p) or real(p))
    code, out, err = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        runs.ckpt,
        "--data-dir",
        runs.eval_data,
        "--beam",
        "1",
        "--device",
        "cpu",
    )
    assert code == 0, err
    assert out.startswith(f"Multi30k test_2016_flickr de-en, {N_EVAL} sentences")  # the config's test_split
    assert len(calls) == 1


def test_evaluate_uses_the_test_files_of_a_files_corpus(capsys, runs, tmp_path):
    state = load_checkpoint(runs.ckpt)
    files = [str(runs.eval_src), str(runs.eval_ref)]
    ckpt = tmp_path / "files.pt"
    _with_experiment(state, ckpt, corpus="files", train_files=files, valid_files=files, test_files=files)
    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt, "--beam", "1", "--device", "cpu")
    assert code == 0, err
    assert out.splitlines()[0] == f"{runs.eval_src} -> {runs.eval_ref}, {N_EVAL} sentences, beam 1"
    result = cli(capsys, "evaluate", "--checkpoint", ckpt, "--split", "test_2016_flickr")
    assert_user_error(*result[::2], "--split", "corpus 'files'", "--src and --ref")
    _with_experiment(state, ckpt, corpus="files", train_files=files, valid_files=files)
    result = cli(capsys, "evaluate", "--checkpoint", ckpt)
    assert_user_error(*result[::2], "no test split", "--src and --ref")


def test_evaluate_reads_the_data_section_of_an_older_checkpoint(capsys, runs, tmp_path):
    """Before per-split fields, data.train/valid/test held a split name, "SRC,TGT" or a path."""
    state = load_checkpoint(runs.ckpt)
    old = {
        "corpus": "multi30k",
        "dataset": "",
        "src_lang": "de",
        "tgt_lang": "en",
        "data_dir": str(runs.eval_data),
        "train": "train",
        "valid": "val",
        "test": "test_2016_flickr",
        "max_train_pairs": 300,
        "max_valid_pairs": 10,
        "max_len": 128,
    }
    ckpt = tmp_path / "old.pt"
    _with_experiment(state, ckpt, **old)
    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt, "--beam", "1", "--device", "cpu")
    assert code == 0, err
    assert out.startswith(f"Multi30k test_2016_flickr de-en, {N_EVAL} sentences")
    pair = f"{runs.eval_src},{runs.eval_ref}"
    _with_experiment(state, ckpt, **{**old, "corpus": "files", "train": pair, "valid": pair, "test": pair})
    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt, "--beam", "1", "--device", "cpu")
    assert code == 0, err
    assert out.startswith(f"{runs.eval_src} -> {runs.eval_ref}, {N_EVAL} sentences")


def test_evaluate_without_an_experiment_needs_files(capsys, runs, tmp_path):
    from attnkit.checkpoint import save_checkpoint

    state = load_checkpoint(runs.ckpt)
    del state["experiment"]
    save_checkpoint(state, tmp_path / "bare.pt")
    result = cli(capsys, "evaluate", "--checkpoint", tmp_path / "bare.pt")
    assert_user_error(*result[::2], "no experiment config", "--src and --ref")
    result = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        runs.ckpt,
        "--src",
        runs.eval_src,
        "--ref",
        runs.eval_ref,
        "--split",
        "val",
    )
    assert_user_error(*result[::2], "--split", "not with --src/--ref")


# -- average ---------------------------------------------------------------------------------------


def test_average_writes_the_mean_of_the_weights(capsys, runs, tmp_path):
    out_ckpt = tmp_path / "avg.pt"
    code, out, err = cli(capsys, "average", "--checkpoints", *runs.step_ckpts, "--output", out_ckpt)
    assert code == 0, err
    assert out == f"averaged 2 checkpoints into {out_ckpt}\n"
    averaged = load_checkpoint(out_ckpt)
    a, b = (load_checkpoint(p)["model"] for p in runs.step_ckpts)
    name = next(k for k, v in a.items() if v.is_floating_point() and not torch.equal(v, b[k]))
    torch.testing.assert_close(averaged["model"][name], (a[name] + b[name]) / 2)
    assert "optimizer" not in averaged
    Translator.from_checkpoint(out_ckpt, device="cpu")  # a usable model


def test_average_rejects_different_models(capsys, runs, tmp_path):
    result = cli(
        capsys, "average", "--checkpoints", runs.step_ckpts[0], runs.rnn_ckpt, "--output", tmp_path / "avg.pt"
    )
    assert_user_error(*result[::2], str(runs.rnn_ckpt), "different model")
    assert not (tmp_path / "avg.pt").exists()


@pytest.mark.slow
def test_average_missing_checkpoint(capsys, runs, tmp_path):
    missing = tmp_path / "nope.pt"
    result = cli(
        capsys, "average", "--checkpoints", runs.step_ckpts[0], missing, "--output", tmp_path / "avg.pt"
    )
    assert_user_error(*result[::2], "checkpoint not found", str(missing))


# -- plot-positional -------------------------------------------------------------------------------


def test_plot_positional_writes_png(capsys, tmp_path):
    code, out, err = cli(
        capsys, "plot-positional", "--d-model", "16", "--max-len", "20", "--out", tmp_path / "pe.png"
    )
    assert code == 0, err
    assert out == f"wrote {tmp_path / 'pe.png'}\n"
    assert_png(tmp_path / "pe.png")


def test_plot_positional_rejects_zero_d_model(capsys, tmp_path):
    result = cli(capsys, "plot-positional", "--d-model", "0", "--out", tmp_path / "pe.png")
    assert_user_error(*result[::2], "--d-model", "an integer from 1 to")
    assert not (tmp_path / "pe.png").exists()


def test_a_checkpoint_whose_data_folder_is_not_here_reads_the_default_place(
    capsys, monkeypatch, runs, tmp_path
):
    """A checkpoint trained elsewhere (its data.data_dir ``../shared/data``, relative to another
    directory) finds its test split in ``$ATTNKIT_DATA`` and says in one line where it read; training
    stores ``--data-dir`` as an absolute path, so a checkpoint read from another directory finds it."""
    state = load_checkpoint(runs.ckpt)
    saved = state["experiment"]["data"]
    ckpt = tmp_path / "moved.pt"
    _with_experiment(state, ckpt, **{**saved, "data_dir": "../not/here"})
    monkeypatch.setenv("ATTNKIT_DATA", str(runs.eval_data))
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "evaluate", "--checkpoint", ckpt, "--beam", "1", "--device", "cpu")
    assert code == 0, err
    assert out.startswith(f"Multi30k test_2016_flickr de-en, {N_EVAL} sentences")
    assert f"data.data_dir ../not/here is not a folder here: reading {runs.eval_data}" in err
    assert saved["data_dir"].startswith("/")  # what `attnkit train --data-dir` stored
