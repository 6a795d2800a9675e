"""``attnkit generate`` and ``attnkit classify``: output format, reproducible sampling, and one line on
stderr with exit code 2 for every bad input.

The checkpoints are small untrained models on a SentencePiece model of a few hundred captions: the
commands' plumbing is under test here, not what the models learned (tests/test_train_tasks.py).
"""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import save_checkpoint
from attnkit.cli import main
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.model import (
    ClassifierConfig,
    LMConfig,
    Transformer,
    TransformerClassifier,
    TransformerConfig,
    TransformerLM,
)

ROOT = Path(__file__).resolve().parents[1]
TEXT = [
    f"{a} {b} {c} ."
    for a in ("A dog", "Two men", "A woman", "Three kids", "The cat")
    for b in ("runs", "sits", "plays", "walks", "sleeps")
    for c in ("on the grass", "in the snow", "at home")
]
LABELS = ["animal", "person"]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("ckpts")
    with pytest.warns(UserWarning, match="too small"):  # the corpus cannot fill 200 pieces
        tok = SubwordTokenizer.train(TEXT, TEXT, vocab_size=200)
    V = tok.src_vocab_size
    lm_cfg = LMConfig.preset("tiny", vocab_size=V, max_len=32)
    clf_cfg = ClassifierConfig.preset("tiny", vocab_size=V, n_classes=2, pooling="attention")
    base = {"tokenizer": tok.state_dict(), "experiment": {}}
    lm = save_checkpoint(
        {**base, "arch": "lm", "model_config": lm_cfg.to_dict(), "model": TransformerLM(lm_cfg).state_dict()},
        out / "lm.pt",
    )
    clf = save_checkpoint(
        {
            **base,
            "arch": "classifier",
            "model_config": clf_cfg.to_dict(),
            "labels": LABELS,
            "model": TransformerClassifier(clf_cfg).state_dict(),
        },
        out / "clf.pt",
    )
    mt_cfg = TransformerConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V, share_vocab=True)
    mt = save_checkpoint(
        {
            **base,
            "arch": "transformer",
            "model_config": mt_cfg.to_dict(),
            "model": Transformer(mt_cfg).state_dict(),
        },
        out / "mt.pt",
    )
    return {"lm": lm, "clf": clf, "mt": mt, "dir": out}


def cli(*argv: str, stdin: str | bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        raw = stdin.encode() if isinstance(stdin, str) else stdin
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def assert_user_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


# -- generate -------------------------------------------------------------------------------------


def test_generate_greedy_continues_the_prompt(ckpts):
    code, out, err = cli(
        "generate", "--checkpoint", str(ckpts["lm"]), "--prompt", "A dog", "--max-new-tokens", "5"
    )
    assert code == 0, err
    assert out.count("\n") == 1 and out.startswith("A dog")


def test_generate_seeded_samples_repeat(ckpts):
    args = [
        "generate",
        "--checkpoint",
        str(ckpts["lm"]),
        "--prompt",
        "Two men",
        "--sample",
        "--top-p",
        "0.95",
        "--temperature",
        "1.5",
        "--num-samples",
        "4",
        "--max-new-tokens",
        "8",
    ]
    a, b, c = cli(*args, "--seed", "1"), cli(*args, "--seed", "1"), cli(*args, "--seed", "2")
    assert a[0] == 0, a[2]
    assert a[1] == b[1] and a[1] != c[1]
    lines = a[1].splitlines()
    assert len(lines) == 4 and all(line.split("\t")[0] == "0" for line in lines)


def test_generate_prompts_of_different_lengths_from_a_file(ckpts, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("A dog\nThree kids play\n\n")
    code, out, err = cli(
        "generate",
        "--checkpoint",
        str(ckpts["lm"]),
        "--input",
        str(prompts),
        "--beam",
        "2",
        "--num-samples",
        "2",
        "--max-new-tokens",
        "4",
    )
    assert code == 0, err
    assert [line.split("\t")[0] for line in out.splitlines()] == ["0", "0", "1", "1", "2", "2"]


@pytest.mark.parametrize(
    "flags, fragments",
    [
        (["--beam", "2", "--nbest", "3"], ["--nbest 3", "beam size 2"]),
        (["--top-k", "5"], ["--top-k", "--sample"]),
        (["--temperature", "0.8", "--top-p", "0.9"], ["--temperature, --top-p", "--sample"]),
        (["--num-samples", "3"], ["--nbest 3"]),  # the flag's name before --nbest
        (["--top-p", "0"], ["--top-p", "over 0 up to 1"]),
        (["--temperature", "-1"], ["--temperature"]),
        (["--temperature", "inf"], ["--temperature", "over 0"]),
        (["--max-new-tokens", "0"], ["--max-len-a, --max-len-b", "no token"]),  # max_len_b's name before
        (["--top-k", "x"], ["--top-k"]),
    ],
)
def test_generate_rejects_bad_flags(ckpts, flags, fragments):
    assert_user_error(
        *cli("generate", "--checkpoint", str(ckpts["lm"]), "--prompt", "A", *flags)[::2], *fragments
    )


def test_generate_needs_a_prompt_or_an_input(ckpts):
    assert_user_error(*cli("generate", "--checkpoint", str(ckpts["lm"]))[::2], "--prompt")


def test_generate_rejects_a_classifier_and_a_missing_checkpoint(ckpts, tmp_path):
    assert_user_error(
        *cli("generate", "--checkpoint", str(ckpts["clf"]), "--prompt", "A")[::2], "not a language model"
    )
    missing = tmp_path / "nope.pt"
    assert_user_error(*cli("generate", "--checkpoint", str(missing), "--prompt", "A")[::2], "not found")


def test_generate_invalid_utf8_input(ckpts, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A dog\n\xff\xfe\n")
    assert_user_error(
        *cli("generate", "--checkpoint", str(ckpts["lm"]), "--input", str(bad))[::2], "bad.txt", "UTF-8"
    )


# -- classify -------------------------------------------------------------------------------------


def test_classify_prints_label_and_probability(ckpts, monkeypatch):
    code, out, err = cli(
        "classify",
        "--checkpoint",
        str(ckpts["clf"]),
        stdin="A dog runs .\nTwo men sit .\n",
        monkeypatch=monkeypatch,
    )
    assert code == 0, err
    for line in out.splitlines():
        label, p = line.split("\t")
        assert label in LABELS and 0.5 <= float(p) <= 1.0


def test_classify_top_k_gives_k_pairs_summing_to_one(ckpts, tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("A cat sleeps .\n")
    code, out, err = cli("classify", "--checkpoint", str(ckpts["clf"]), "--input", str(f), "--top-k", "2")
    assert code == 0, err
    cells = out.strip().split("\t")
    assert sorted(cells[::2]) == LABELS and float(cells[1]) + float(cells[3]) == pytest.approx(1.0, abs=2e-4)


@pytest.mark.parametrize(
    "flags, stdin, fragments",
    [
        (["--top-k", "3"], "A dog\n", ["top_k", "between 1 and 2"]),
        (["--top-k", "0"], "A dog\n", ["--top-k"]),
        ([], "A dog\n\nA cat\n", ["line 2", "empty"]),
    ],
)
def test_classify_rejects_bad_input(ckpts, monkeypatch, flags, stdin, fragments):
    result = cli("classify", "--checkpoint", str(ckpts["clf"]), *flags, stdin=stdin, monkeypatch=monkeypatch)
    assert_user_error(*result[::2], *fragments)


def test_classify_rejects_an_lm_checkpoint_in_a_real_process(ckpts):
    proc = subprocess.run(
        [sys.executable, "-m", "attnkit.cli", "classify", "--checkpoint", str(ckpts["lm"])],
        input="A dog\n",
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert_user_error(proc.returncode, proc.stderr, "not a classifier")


@pytest.mark.parametrize("command", ["generate", "classify"])
def test_help_exits_0(command):
    code, out, _ = cli(command, "--help")
    assert code == 0 and out.startswith(f"usage: attnkit {command}")


# -- attention --------------------------------------------------------------------------------------


def test_attention_on_an_lm_draws_every_layer_and_head(ckpts, tmp_path):
    code, out, err = cli(
        "attention",
        "--checkpoint",
        str(ckpts["lm"]),
        "--text",
        "A dog runs .",
        "--out",
        str(tmp_path / "lm.png"),
    )
    assert code == 0, err
    assert (tmp_path / "lm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_attention_on_a_classifier_writes_the_review_picture(ckpts, tmp_path):
    code, out, err = cli(
        "attention",
        "--checkpoint",
        str(ckpts["clf"]),
        "--text",
        "Two men sit at home .",
        "--out",
        str(tmp_path / "review"),
    )
    assert code == 0, err
    page = (tmp_path / "review.html").read_text()
    assert page.count("<span") == 6  # one per word, subwords merged
    assert (tmp_path / "review.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "review_encoder_self.png").is_file()
    assert out.split("\t")[0] in LABELS


@pytest.mark.parametrize("method", ["rollout", "flow"])
@pytest.mark.parametrize("which", ["lm", "clf"])
def test_attention_method_follows_the_layers_down_to_the_input(ckpts, tmp_path, which, method):
    out = tmp_path / "map.png"
    argv = ["attention", "--checkpoint", str(ckpts[which]), "--text", "Two men sit .", "--out", str(out)]
    code, _, err = cli(*argv, "--method", method)
    assert code == 0, err
    drawn = out if which == "lm" else tmp_path / "map_encoder_self.png"
    assert drawn.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("which", ["lm", "clf"])
def test_attention_on_empty_text_is_one_line(ckpts, tmp_path, which):
    result = cli(
        "attention", "--checkpoint", str(ckpts[which]), "--text", "  ", "--out", str(tmp_path / "x.png")
    )
    assert_user_error(*result[::2], "empty")


# -- evaluate ---------------------------------------------------------------------------------------


def test_evaluate_lm_prints_perplexity_and_bits_per_token(ckpts, tmp_path):
    f = tmp_path / "text.txt"
    f.write_text("A dog runs on the grass .\nTwo men sit in the snow .\n")
    code, out, err = cli("evaluate", "--checkpoint", str(ckpts["lm"]), "--input", str(f))
    assert code == 0, err
    values = {line.split()[0]: line.split() for line in out.splitlines()}
    ppl, bits = float(values["perplexity"][1]), float(values["bits"][3])
    assert ppl > 1 and abs(bits - __import__("math").log2(ppl)) < 1e-3


def test_evaluate_classifier_prints_accuracy_macro_f1_and_confusion(ckpts, tmp_path):
    f = tmp_path / "test.tsv"
    f.write_text("label\ttext\nanimal\tA dog runs .\nperson\tTwo men sit .\nanimal\tThe cat sleeps .\n")
    code, out, err = cli(
        "evaluate",
        "--checkpoint",
        str(ckpts["clf"]),
        "--input",
        str(f),
        "--confusion",
        str(tmp_path / "cm.png"),
    )
    assert code == 0, err
    assert "accuracy" in out and "macro-F1" in out and "3 examples" in out
    assert (tmp_path / "cm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "content, fragments",
    [
        ("animal A dog\n", ["test.tsv:1", "label<TAB>text"]),
        ("robot\tA dog\n", ["test.tsv:1", "unknown label 'robot'"]),
        ("animal\tA dog\nperson\t \n", ["test.tsv:2", "empty text"]),
        (b"animal\t\xff\n", ["test.tsv", "UTF-8"]),
    ],
)
def test_evaluate_classifier_bad_file_names_file_and_line(ckpts, tmp_path, content, fragments):
    f = tmp_path / "test.tsv"
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert_user_error(*cli("evaluate", "--checkpoint", str(ckpts["clf"]), "--input", str(f))[::2], *fragments)


def test_evaluate_task_flags_do_not_mix(ckpts, tmp_path):
    assert_user_error(
        *cli("evaluate", "--checkpoint", str(ckpts["lm"]), "--src", "a", "--ref", "b")[::2], "--input"
    )
    assert_user_error(*cli("evaluate", "--checkpoint", str(ckpts["lm"]))[::2], "no test split", "--input")


# -- translate --sample -----------------------------------------------------------------------------


def test_translate_sample_is_seeded_and_top_k_1_is_greedy(ckpts, monkeypatch):
    def run(*flags):
        return cli(
            "translate",
            "--checkpoint",
            str(ckpts["mt"]),
            *flags,
            stdin="A dog runs .\nTwo men sit .\n",
            monkeypatch=monkeypatch,
        )

    a = run("--sample", "--temperature", "3", "--nbest", "3", "--seed", "1")
    b = run("--sample", "--temperature", "3", "--nbest", "3", "--seed", "1")
    c = run("--sample", "--temperature", "3", "--nbest", "3", "--seed", "2")
    assert a[0] == 0, a[2]
    assert a[1] == b[1] and a[1] != c[1] and len(a[1].splitlines()) == 6
    greedy, top1 = run("--beam", "1"), run("--sample", "--top-k", "1", "--seed", "5")
    assert top1[0] == 0 and top1[1] == greedy[1]


def test_translate_sampling_flags_need_sample(ckpts, monkeypatch):
    result = cli(
        "translate", "--checkpoint", str(ckpts["mt"]), "--top-p", "0.9", stdin="A\n", monkeypatch=monkeypatch
    )
    assert_user_error(*result[::2], "--sample")


def test_classify_reads_text_pairs_like_training(ckpts, tmp_path):
    from attnkit.data.readers import read_labelled
    from attnkit.tasks.classification import Classifier, classifier_pieces, example_text

    f = tmp_path / "pairs.tsv"
    f.write_text("animal\tA dog runs .\tIt is fast .\n")
    (example,) = read_labelled(f, LABELS)
    assert example.label == "animal" and example_text(example) == ("A dog runs .", "It is fast .")
    clf = Classifier.from_checkpoint(ckpts["clf"], device="cpu")
    ids = classifier_pieces(clf.tokenizer, example_text(example))
    assert clf.tokenizer.eos_id in ids
    code, out, err = cli("evaluate", "--checkpoint", str(ckpts["clf"]), "--input", str(f))
    assert code == 0, err


def test_generate_from_an_empty_prompt(ckpts):
    argv = ["--prompt", "", "--sample", "--top-k", "5", "--seed", "3", "--max-new-tokens", "6"]
    code, out, err = cli("generate", "--checkpoint", str(ckpts["lm"]), *argv)
    assert code == 0, err
    assert out.count("\n") == 1
