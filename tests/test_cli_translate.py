"""``attnkit translate`` and ``attnkit attention`` end to end, and their one-line errors (exit 2)."""

from __future__ import annotations

import pytest

from cli_helpers import (
    SENTENCES,
    api_translations,
    assert_png,
    assert_user_error,
    bad_checkpoint,
    cli,
    cli_stdin,
    run_process,
)

# -- translate -------------------------------------------------------------------------------------


def test_translate_stdin_to_stdout_keeps_empty_lines(capsys, monkeypatch, runs):
    lines = [SENTENCES[0], "", SENTENCES[1]]
    code, out, err = cli_stdin(
        capsys,
        monkeypatch,
        "\n".join(lines).encode() + b"\n",
        "translate",
        "--checkpoint",
        runs.ckpt,
        "--beam",
        "1",
        "--device",
        "cpu",
    )
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
        "translate",
        "--checkpoint",
        runs.ckpt,
        "--beam",
        "1",
        "--device",
        "cpu",
        stdin=f"{SENTENCES[0]}\n{long_line}\n".encode(),
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert len(proc.stdout.decode().split("\n")) == 3  # two lines, each newline-terminated
    assert "Traceback" not in err
    assert "attnkit: warning: 1 input sentence(s) longer than 64 subword tokens were truncated" in err


@pytest.mark.parametrize(
    "flags, fragments",
    [
        (["--beam", "0"], ["--beam", "an integer from 1 to 256", "got 0"]),
        (["--nbest", "-1"], ["--nbest"]),
        (["--batch-tokens", "many"], ["--batch-tokens"]),
        (["--device", "gpu"], ["--device", "'gpu'"]),
    ],
)
def test_translate_rejects_bad_flags(capsys, tmp_path, flags, fragments):
    assert_user_error(*cli(capsys, "translate", "--checkpoint", tmp_path / "x.pt", *flags)[::2], *fragments)


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
)
def test_translate_rejectsbad_checkpoint(capsys, monkeypatch, runs, tmp_path, kind, fragment):
    path = bad_checkpoint(kind, tmp_path, runs.ckpt)
    result = cli_stdin(capsys, monkeypatch, b"ein Hund\n", "translate", "--checkpoint", path)
    assert_user_error(*result[::2], str(path), fragment)


def test_translate_truncated_checkpoint_in_a_real_process(runs, tmp_path):
    path = bad_checkpoint("truncated", tmp_path, runs.ckpt)
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
            capsys,
            monkeypatch,
            "\n".join(lines).encode() + b"\n",
            "translate",
            "--checkpoint",
            runs.rnn_ckpt,
            "--beam",
            beam,
            "--device",
            "cpu",
        )
        assert code == 0, err
        assert out.split("\n") == [*api_translations(runs.rnn_ckpt, lines, beam=int(beam)), ""]
        assert out.split("\n")[1] == ""


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
