"""The ``attnkit`` command end to end: each subcommand's output, and a one-line error for each bad input.

The product rule under test: a wrong flag, a bad config key or value, a missing or malformed file, or
a corrupt or incompatible checkpoint prints ONE line on stderr and exits with code 2, no traceback.

One tiny Transformer and one tiny RNN are trained once, on 300 Multi30k pairs, by a module fixture.
Most tests call ``attnkit.cli.main`` in-process (fast); a few run ``python -m attnkit.cli`` to check
the exit code and stderr of a real process.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.cli import main
from attnkit.data import multi30k
from attnkit.errors import DataError
from attnkit.evaluate import evaluate
from attnkit.train import load_config, train
from attnkit.translate import Translator

# The corpus lives beside the repository (../shared/data), never inside it.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Trains in a few seconds on one CPU thread: enough to exercise every command, not to translate well.
# lr 0.01 is high on purpose: after 20 steps greedy search emits words rather than only end-of-sentence.
TINY_CONFIG = """\
data: {max_train_pairs: 300, max_valid_pairs: 10}
tokenizer: {vocab_size: 300}
model: {preset: tiny}
train: {max_steps: 20, max_tokens: 1000, schedule: inverse_sqrt, lr: 0.01, warmup_steps: 10, progress: false}
valid: {every: 10, keep_last: 2}
"""
SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau mit einem roten Hut."]
N_EVAL = 20  # sentences in the small evaluation split


@dataclass
class Runs:
    """What the module fixture trained, and the small data it wrote."""

    transformer_dir: Path
    rnn_dir: Path
    train_stdout: str  # what `attnkit train` printed for the Transformer
    eval_data: Path  # a data dir whose multi30k/test_2016_flickr.{de,en}.gz hold N_EVAL pairs
    eval_src: Path  # the same pairs as plain files
    eval_ref: Path

    @property
    def ckpt(self) -> Path:
        return self.transformer_dir / "checkpoint_best.pt"

    @property
    def rnn_ckpt(self) -> Path:
        return self.rnn_dir / "checkpoint_best.pt"

    @property
    def step_ckpts(self) -> list[Path]:
        return [self.transformer_dir / "checkpoint_step10.pt", self.transformer_dir / "checkpoint_step20.pt"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    if not (SHARED_DATA / "multi30k" / "train.de.gz").is_file():
        pytest.skip(f"Multi30k not found under {SHARED_DATA}")
    root = tmp_path_factory.mktemp("cli")
    config = root / "tiny.yaml"
    config.write_text(TINY_CONFIG)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared CPU: more threads only contend (~5x slower)
    try:
        # The Transformer through the command itself (its success path), the RNN through the API.
        stdout, stderr = io.StringIO(), io.StringIO()
        with redirect_stdout(stdout), redirect_stderr(stderr):
            code = main([
                "train", "--config", str(config), "--data-dir", str(SHARED_DATA),
                "--output-dir", str(root / "transformer"), "model.share_vocab=true",
            ])  # fmt: skip
        assert code == 0, stderr.getvalue()
        rnn = load_config(
            config, ["model.arch=rnn", f"data.data_dir={SHARED_DATA}", f"output_dir={root / 'rnn'}"]
        )
        train(rnn, log=lambda message: None)

        eval_data = root / "eval_data"
        (eval_data / "multi30k").mkdir(parents=True)
        texts = {}
        for lang in ("de", "en"):
            with gzip.open(
                SHARED_DATA / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8"
            ) as f:
                texts[lang] = "".join(f.readline() for _ in range(N_EVAL))
            with gzip.open(
                eval_data / "multi30k" / f"test_2016_flickr.{lang}.gz", "wt", encoding="utf-8"
            ) as f:
                f.write(texts[lang])
            (root / f"eval.{lang}").write_text(texts[lang], encoding="utf-8")
        yield Runs(
            root / "transformer",
            root / "rnn",
            stdout.getvalue(),
            eval_data,
            root / "eval.de",
            root / "eval.en",
        )
    finally:
        torch.set_num_threads(threads)


# -- helpers ---------------------------------------------------------------------------------------


def cli(capsys, *argv) -> tuple[int, str, str]:
    """Run ``attnkit ARGV`` in-process: (exit code, stdout, stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse: --help and usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def cli_stdin(capsys, monkeypatch, data: bytes, *argv) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    return cli(capsys, *argv)


def run_process(*argv, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """``python -m attnkit.cli ARGV`` in a real process (one torch thread, as in the fixture)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "attnkit.cli", *map(str, argv)]
    return subprocess.run(cmd, input=stdin, capture_output=True, env=env, timeout=120)


def assert_user_error(code: int, err: str, *fragments: str) -> None:
    """Exit code 2 and exactly one stderr line, no traceback, naming every fragment."""
    assert code == 2, f"exit code {code}, stderr:\n{err}"
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


def write_config(tmp_path: Path, text: str = TINY_CONFIG) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def api_translations(ckpt: Path, lines: list[str], beam: int) -> list[str]:
    translator = Translator.from_checkpoint(ckpt, device="cpu")
    return [t.text for t in translator.translate(lines, beam=beam)]


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path} is not a PNG"


# -- help and usage --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [None, "train", "translate", "evaluate", "attention", "plot-positional", "average"]
)
def test_help_exits_0(capsys, command):
    code, out, err = cli(capsys, *([command] if command else []), "--help")
    assert code == 0, err
    assert out.startswith(f"usage: attnkit{' ' + command if command else ''}")


def test_no_command_and_unknown_flag_are_usage_errors(capsys):
    assert_user_error(*cli(capsys)[::2], "required")
    assert_user_error(*cli(capsys, "plot-positional", "--out", "x.png", "--bogus")[::2], "--bogus")


# -- train -----------------------------------------------------------------------------------------


def test_train_prints_best_checkpoint_and_keeps_step_checkpoints(runs):
    assert f"best checkpoint: {runs.ckpt} (valid BLEU " in runs.train_stdout
    assert runs.ckpt.is_file()
    assert all(p.is_file() for p in runs.step_ckpts)


@pytest.mark.parametrize(
    "override, fragments",
    [
        ("train.lrr=1", ["lrr"]),
        ("train.lr=-1", ["lr", "must be positive"]),
        ("model.d_model=30", ["d_model", "n_heads=4"]),  # the tiny preset has 4 heads
        ("model.arch=lstm", ["model.arch", "lstm", "transformer, rnn"]),
        ("valid.every=often", ["every", "integer"]),
        ("trainn.lr=1", ["trainn"]),
        ("train.lr", ["'train.lr'", "section.key=value"]),
    ],
)
def test_train_rejects_bad_override(capsys, tmp_path, override, fragments):
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", tmp_path / "out", override
    )
    assert_user_error(*result[::2], *fragments)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "content, fragments",
    [
        (None, ["config file not found"]),
        (b"train: [1, 2\n", ["not valid YAML"]),  # the parser's message spans lines: still one line
        (b"- data\n- train\n", ["must be a mapping"]),
        (b"train: {lr: \xff}\n", ["not a UTF-8 text file"]),
    ],
    ids=["missing", "not-yaml", "not-a-mapping", "not-utf8"],
)
def test_train_rejects_bad_config_file(capsys, tmp_path, content, fragments):
    config = tmp_path / "config.yaml"
    if content is not None:
        config.write_bytes(content)
    result = cli(capsys, "train", "--config", config, "--output-dir", tmp_path / "out")
    assert_user_error(*result[::2], str(config), *fragments)


def test_train_refuses_an_existing_run(capsys, runs, tmp_path):
    before = sorted(p.name for p in runs.transformer_dir.iterdir())
    code, _, err = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", runs.transformer_dir,
        "--data-dir", SHARED_DATA,
    )  # fmt: skip
    assert_user_error(code, err, "already holds a training run", "--resume", "--overwrite")
    assert sorted(p.name for p in runs.transformer_dir.iterdir()) == before


def test_train_resume_from_missing_checkpoint(capsys, tmp_path):
    missing = tmp_path / "nope.pt"
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", tmp_path, "--resume", missing
    )
    assert_user_error(*result[::2], "checkpoint not found", str(missing))


def test_train_unknown_language_lists_valid_ones(capsys, tmp_path):
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", tmp_path / "out",
        "--data-dir", tmp_path, "data.src_lang=xx",
    )  # fmt: skip
    assert_user_error(*result[::2], "'xx'", "de, en, fr, cs")


@pytest.mark.parametrize("problem", ["line-counts", "empty", "invalid-utf8"])
def test_train_files_corpus_names_the_bad_file(capsys, tmp_path, problem):
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src_bytes, tgt_bytes, fragments = {
        "line-counts": (
            b"ein Hund\nzwei Katzen\ndrei\n",
            b"a dog\ntwo cats\n",
            ["line counts differ", str(src), str(tgt)],
        ),
        "empty": (b"", b"", ["empty corpus", str(src)]),
        "invalid-utf8": (
            b"ein Hund\nzwei \xffKatzen\n",
            b"a dog\ntwo cats\n",
            [f"{src}:2", "not valid UTF-8"],
        ),
    }[problem]
    src.write_bytes(src_bytes)
    tgt.write_bytes(tgt_bytes)
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", tmp_path / "out",
        "data.corpus=files", f"data.train={src},{tgt}", f"data.valid={src},{tgt}",
    )  # fmt: skip
    assert_user_error(*result[::2], *fragments)


def test_train_without_data_or_network_says_where_to_put_the_files(capsys, tmp_path, monkeypatch):
    requested = []

    def no_network(url, *args, **kwargs):
        requested.append(url)
        raise urllib.error.URLError("network disabled in this test")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--output-dir",
        tmp_path / "out",
        "--data-dir",
        empty,
    )
    assert_user_error(
        *result[::2], "download of", "failed", f"Put the Multi30k files at {empty / 'multi30k'}"
    )
    assert requested and all(url.startswith(multi30k.BASE_URL) for url in requested)


def test_train_bad_key_in_a_real_process(tmp_path):
    proc = run_process(
        "train", "--config", write_config(tmp_path), "--output-dir", tmp_path / "out", "train.lrr=1"
    )
    assert_user_error(proc.returncode, proc.stderr.decode(), "lrr")
    assert proc.stdout == b""


# -- translate -------------------------------------------------------------------------------------


def test_translate_stdin_to_stdout_keeps_empty_lines(capsys, monkeypatch, runs):
    lines = [SENTENCES[0], "", SENTENCES[1]]
    code, out, err = cli_stdin(
        capsys, monkeypatch, "\n".join(lines).encode() + b"\n",
        "translate", "--checkpoint", runs.ckpt, "--beam", "1", "--device", "cpu",
    )  # fmt: skip
    assert code == 0, err
    assert out.split("\n") == [*api_translations(runs.ckpt, lines, beam=1), ""]
    assert out.split("\n")[1] == "" and out.split("\n")[0] != ""


def test_translate_stdin_without_final_newline_or_with_crlf(capsys, monkeypatch, runs):
    expected = api_translations(runs.ckpt, SENTENCES[:2], beam=1)
    for data in ("\n".join(SENTENCES[:2]).encode(), "\r\n".join(SENTENCES[:2]).encode() + b"\r\n"):
        code, out, err = cli_stdin(
            capsys,
            monkeypatch,
            data,
            "translate",
            "--checkpoint",
            runs.ckpt,
            "--beam",
            "1",
            "--device",
            "cpu",
        )
        assert code == 0, err
        assert out.splitlines() == expected


def test_translate_input_and_output_files(capsys, runs, tmp_path):
    src, hyp = tmp_path / "in.de", tmp_path / "out" / "hyp.en"
    hyp.parent.mkdir()
    src.write_text("\n".join([*SENTENCES, ""]) + "\n", encoding="utf-8")
    code, out, err = cli(
        capsys, "translate", "--checkpoint", runs.ckpt, "--input", src, "--output", hyp, "--device", "cpu"
    )
    assert code == 0, err
    assert out == ""
    assert hyp.read_text(encoding="utf-8").split("\n") == [
        *api_translations(runs.ckpt, [*SENTENCES, ""], beam=4),
        "",
    ]


def test_translate_nbest_gives_n_lines_per_input(capsys, monkeypatch, runs):
    data = f"{SENTENCES[0]}\n\n{SENTENCES[1]}\n".encode()
    code, out, err = cli_stdin(
        capsys, monkeypatch, data, "translate", "--checkpoint", runs.ckpt, "--nbest", "2", "--device", "cpu"
    )
    assert code == 0, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert [len(r) for r in rows] == [3] * 6
    assert [int(r[0]) for r in rows] == [0, 0, 1, 1, 2, 2]
    scores = [float(r[1]) for r in rows]
    assert scores[0] >= scores[1] and scores[4] >= scores[5]
    assert rows[2][2] == rows[3][2] == ""  # the empty input: empty hypotheses, still two lines


def test_translate_truncates_an_overlong_line_with_a_warning(runs):
    long_line = " ".join(["Hund"] * 500)
    proc = run_process(
        "translate", "--checkpoint", runs.ckpt, "--beam", "1", "--device", "cpu",
        stdin=f"{SENTENCES[0]}\n{long_line}\n".encode(),
    )  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert len(proc.stdout.decode().split("\n")) == 3  # two lines, each newline-terminated
    assert "Traceback" not in err
    assert "attnkit: warning: 1 input sentence(s) longer than 64 subword tokens were truncated" in err


@pytest.mark.parametrize(
    "flags, fragments",
    [
        (["--beam", "0"], ["--beam", "positive integer", "'0'"]),
        (["--nbest", "-1"], ["--nbest"]),
        (["--batch-tokens", "many"], ["--batch-tokens"]),
        (["--device", "gpu"], ["--device", "'gpu'"]),
    ],
)
def test_translate_rejects_bad_flags(capsys, tmp_path, flags, fragments):
    assert_user_error(*cli(capsys, "translate", "--checkpoint", tmp_path / "x.pt", *flags)[::2], *fragments)


def _bad_checkpoint(kind: str, tmp_path: Path, good: Path) -> Path:
    path = tmp_path / f"{kind}.pt"
    if kind.startswith("random"):  # deterministic "random" bytes, so a failure reproduces
        path.write_bytes(random.Random(int(kind.removeprefix("random"))).randbytes(2000))
    elif kind == "truncated":
        path.write_bytes(good.read_bytes()[:100_000])
    elif kind == "foreign":
        torch.save({"a": 1}, path)
    return path


@pytest.mark.parametrize(
    "kind, fragment",
    [
        ("missing", "checkpoint not found"),
        ("random0", "not a readable checkpoint"),
        ("random2", "not a readable checkpoint"),
        ("random20", "not a readable checkpoint"),
        ("truncated", "not a readable checkpoint"),
        ("foreign", "not an attnkit checkpoint"),
    ],
)  # fmt: skip
def test_translate_rejects_bad_checkpoint(capsys, monkeypatch, runs, tmp_path, kind, fragment):
    path = _bad_checkpoint(kind, tmp_path, runs.ckpt)
    result = cli_stdin(capsys, monkeypatch, b"ein Hund\n", "translate", "--checkpoint", path)
    assert_user_error(*result[::2], str(path), fragment)


def test_translate_truncated_checkpoint_in_a_real_process(runs, tmp_path):
    path = _bad_checkpoint("truncated", tmp_path, runs.ckpt)
    proc = run_process("translate", "--checkpoint", path, stdin=b"ein Hund\n")
    assert_user_error(proc.returncode, proc.stderr.decode(), str(path), "not a readable checkpoint")
    assert proc.stdout == b""


def test_translate_missing_input_file(capsys, runs, tmp_path):
    missing = tmp_path / "nope.de"
    result = cli(capsys, "translate", "--checkpoint", runs.ckpt, "--input", missing)
    assert_user_error(*result[::2], "no such file", str(missing))


def test_translate_invalid_utf8_input(capsys, monkeypatch, runs, tmp_path):
    src = tmp_path / "in.de"
    src.write_bytes(b"ein Hund\nzwei \xffKatzen\n")
    assert_user_error(
        *cli(capsys, "translate", "--checkpoint", runs.ckpt, "--input", src)[::2], f"{src}:2", "UTF-8"
    )
    result = cli_stdin(
        capsys, monkeypatch, b"ein Hund\nzwei \xffKatzen\n", "translate", "--checkpoint", runs.ckpt
    )
    assert_user_error(*result[::2], "stdin", "not valid UTF-8")


def test_translate_with_an_rnn_checkpoint(capsys, monkeypatch, runs):
    lines = [SENTENCES[0], "", SENTENCES[2]]
    for beam in ("1", "3"):
        code, out, err = cli_stdin(
            capsys, monkeypatch, "\n".join(lines).encode() + b"\n",
            "translate", "--checkpoint", runs.rnn_ckpt, "--beam", beam, "--device", "cpu",
        )  # fmt: skip
        assert code == 0, err
        assert out.split("\n") == [*api_translations(runs.rnn_ckpt, lines, beam=int(beam)), ""]
        assert out.split("\n")[1] == ""


# -- evaluate --------------------------------------------------------------------------------------


def test_evaluate_split_prints_scores_with_signatures(capsys, runs, tmp_path):
    hyp = tmp_path / "hyp.en"
    code, out, err = cli(
        capsys, "evaluate", "--checkpoint", runs.ckpt, "--split", "test_2016_flickr", "--data-dir", runs.eval_data,
        "--beam", "1", "--device", "cpu", "--hyp-output", hyp,
    )  # fmt: skip
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
        capsys, "evaluate", "--checkpoint", runs.ckpt, "--src", runs.eval_src, "--ref", runs.eval_ref,
        "--lowercase", "--beam", "1", "--device", "cpu",
    )  # fmt: skip
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


# -- attention -------------------------------------------------------------------------------------


def test_attention_writes_cross_and_self_attention_pngs(capsys, runs, tmp_path):
    out_png = tmp_path / "maps" / "map.png"
    code, out, err = cli(
        capsys,
        "attention",
        "--checkpoint",
        runs.ckpt,
        "--text",
        SENTENCES[0],
        "--out",
        out_png,
        "--device",
        "cpu",
    )
    assert code == 0, err
    assert out.startswith("translation: ")
    for name in ("map.png", "map_encoder_self.png", "map_decoder_self.png"):
        assert_png(out_png.with_name(name))
        assert f"wrote {out_png.with_name(name)}" in out


def test_attention_rnn_has_cross_attention_only(capsys, runs, tmp_path):
    out_png = tmp_path / "rnn.png"
    code, _, err = cli(
        capsys,
        "attention",
        "--checkpoint",
        runs.rnn_ckpt,
        "--text",
        SENTENCES[1],
        "--out",
        out_png,
        "--beam",
        "1",
    )
    assert code == 0, err
    assert_png(out_png)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rnn.png"]


def test_attention_empty_text(capsys, runs, tmp_path):
    result = cli(capsys, "attention", "--checkpoint", runs.ckpt, "--text", "", "--out", tmp_path / "map.png")
    assert_user_error(*result[::2], "empty")
    assert not (tmp_path / "map.png").exists()


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
    assert_user_error(*result[::2], "--d-model", "positive integer")
    assert not (tmp_path / "pe.png").exists()


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


def test_average_missing_checkpoint(capsys, runs, tmp_path):
    missing = tmp_path / "nope.pt"
    result = cli(
        capsys, "average", "--checkpoints", runs.step_ckpts[0], missing, "--output", tmp_path / "avg.pt"
    )
    assert_user_error(*result[::2], "checkpoint not found", str(missing))
