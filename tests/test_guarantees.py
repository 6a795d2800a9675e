"""The guarantees of docs/reference/guarantees.md, each kept as a rule: checked for every command (their
parsers) or in the one place that applies it, not case by case.

- An output never replaces an input of the same call, nor anything the command did not write.
- Every byte of a checkpoint is checked; a config that does not fit its weights allocates nothing.
- A resume refuses other training data.
- The HTTP schema is the contract; no speed setting changes the process's arithmetic.
- Every path a user can create works or gets one line; input is read in linear time; a request body
  that stops arriving answers 408.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint, save_checkpoint
from attnkit.cli import build_parser, parse
from attnkit.cli.paths import (
    ROLE_INPUT,
    ROLE_OUTPUT_FOLDER,
    ROLE_RUN_FOLDER,
    check_paths,
    commands_of,
    role,
)
from attnkit.errors import CheckpointError, ConfigError
from cli_helpers import assert_user_error
from fault_helpers import cli, make_tokenizer, write_checkpoint

torch.set_num_threads(1)


# -- an output never replaces an input: every (command, output flag, input flag) of the parsers ---


def _triples() -> list[tuple[str, str, str]]:
    found = []
    for command, parser in commands_of(build_parser()):
        flags = {a: role(command, a) for a in parser._actions}
        inputs = [a for a, r in flags.items() if r == ROLE_INPUT]
        outputs = [a for a, r in flags.items() if r not in (None, ROLE_INPUT)]
        for out in outputs:
            for inp in inputs:
                found.append((command, _name(out), _name(inp)))
    return found


def _name(action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


def _argv(command: str, given: dict[str, str], root: Path) -> list[str]:
    """``command`` with the ``given`` flags and a made-up value for every other required one."""
    parser = dict(commands_of(build_parser()))[command]
    positional, options = [], []
    for action in parser._actions:
        name = _name(action)
        if name == "help":
            continue
        value = given.get(name)
        if value is None and (action.required or not action.option_strings):
            kind = role(command, action)
            if kind == ROLE_INPUT:
                value = str(root / f"other_{action.dest}")
                Path(value).write_text("another input\n")
            elif kind is not None:
                value = str(root / f"new_{action.dest}")
            else:
                value = action.choices[0] if action.choices else "1"
        if value is None:
            continue
        if action.option_strings:
            options += [name, value]
        else:
            positional.append(value)
    return [command, *positional, *options]


FORMS = ["same path", "symlink", "hard link", "dotted path"]


@pytest.mark.parametrize("command,out_flag,in_flag", _triples(), ids="-".join)
def test_no_output_flag_of_any_command_replaces_an_input(tmp_path, command, out_flag, in_flag):
    """The property: whatever the command, output flag and input flag, an output that names the input
    (itself, a link to it, a hard link, another spelling) is refused in one line before any work,
    and the input's bytes are untouched."""
    for form in FORMS:
        root = tmp_path / form.replace(" ", "_")
        root.mkdir()
        inp = root / "input.bin"
        inp.write_bytes(b"the user's file\n")
        out = {
            "same path": inp,
            "symlink": root / "link",
            "hard link": root / "hard",
            "dotted path": root / "sub" / ".." / "input.bin",
        }[form]
        if form == "symlink":
            out.symlink_to(inp)
        elif form == "hard link":
            os.link(inp, out)
        elif form == "dotted path":
            (root / "sub").mkdir()
        argv = _argv(command, {out_flag: str(out), in_flag: str(inp)}, root)
        parser = build_parser()
        kind = next(
            role(command, a) for a in dict(commands_of(parser))[command]._actions if _name(a) == out_flag
        )
        try:
            args = parse(argv, parser)
        except SystemExit:  # argparse refused the combination (one of two exclusive flags): nothing ran
            args = None
        if args is not None and kind != ROLE_RUN_FOLDER:
            subparser = dict(commands_of(parser))[command]
            with pytest.raises(ConfigError, match=f"{out_flag}.*{in_flag}"):
                check_paths(command, subparser, args)
        code, _, err = cli(*argv)
        assert code == 2, (form, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert inp.read_bytes() == b"the user's file\n", form


def test_a_folder_output_that_holds_an_input_is_refused(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    ckpt = write_checkpoint(folder / "model.pt", make_tokenizer(0))
    before = ckpt.read_bytes()
    parser = build_parser()
    roles = {(c, _name(a)): role(c, a) for c, p in commands_of(parser) for a in p._actions if role(c, a)}
    assert roles[("export", "--output")] == ROLE_OUTPUT_FOLDER
    code, _, err = cli(
        "export", "--checkpoint", ckpt, "--format", "ctranslate2", "--output", folder, "--force"
    )
    assert_user_error(code, err, "holds --checkpoint")
    assert ckpt.read_bytes() == before


def test_a_terminal_or_a_link_loop_is_no_input_to_protect(tmp_path):
    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    code, out, err = cli(
        "translate",
        "--checkpoint",
        ckpt,
        "--output",
        "/dev/stdout",
        stdin=b"Ein Hund.\n",
    )
    assert code == 0 and "same file" not in err, err
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, _, err = cli("export", "--checkpoint", loop, "--format", "ctranslate2", "--output", tmp_path / "o")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_every_path_flag_has_a_role(tmp_path):
    """A flag whose value is a file or folder must be known here, or the rules above miss it."""
    pathlike = ("file", "folder", "checkpoint", "path", "image", "dir")
    missing = []
    for command, parser in commands_of(build_parser()):
        for action in parser._actions:
            text = f"{action.help or ''} {action.dest}".lower()
            if action.nargs == 0 or action.type not in (None, str) or action.choices or action.dest == "help":
                continue
            if (
                any(word in text for word in pathlike)
                and action.dest not in ("overrides", "format")
                and "field" not in action.dest
            ):
                if role(command, action) is None:
                    missing.append(f"{command} {_name(action)}")
    assert not missing


# -- what a command did not write is replaced only with --force, and --force only replaces its own --


def test_force_replaces_only_an_attnkit_checkpoint(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    a = write_checkpoint(tmp_path / "a.pt", make_tokenizer(0))
    b = write_checkpoint(tmp_path / "b.pt", make_tokenizer(0), seed=1)
    code, _, err = cli("average", "--checkpoints", a, b, "--output", notes, "--force")
    assert_user_error(code, err, "not an attnkit checkpoint")
    code, _, err = cli("import", tmp_path, "--format", "huggingface", "--output", notes, "--force")
    assert_user_error(code, err, "not an attnkit checkpoint")
    assert notes.read_text() == "my notes\n"
    existing = write_checkpoint(tmp_path / "existing.pt", make_tokenizer(0), seed=2)
    code, _, err = cli("average", "--checkpoints", a, b, "--output", existing)
    assert_user_error(code, err, "already exists", "--force")
    code, _, err = cli("average", "--checkpoints", a, b, "--output", existing, "--force")
    assert code == 0, err


def test_a_text_output_never_replaces_a_checkpoint(tmp_path):
    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    other = write_checkpoint(tmp_path / "other.pt", make_tokenizer(0), seed=1)
    before = other.read_bytes()
    code, _, err = cli("translate", "--checkpoint", ckpt, "--output", other, stdin=b"Ein Hund.\n")
    assert_user_error(code, err, "archive")
    assert other.read_bytes() == before


def test_a_run_folder_with_a_copied_best_checkpoint_is_not_replaced(tmp_path):
    from attnkit.train.run_folder import RunFolder

    folder = tmp_path / "run"
    folder.mkdir()
    best = write_checkpoint(folder / "checkpoint_best.pt", make_tokenizer(0))
    with pytest.raises(ConfigError, match="checkpoint_best.pt"):
        with RunFolder(folder, resume=False, overwrite=False):
            pass
    assert best.exists()


@pytest.mark.slow
def test_training_keeps_the_user_s_config_in_its_run_folder(tmp_path):
    from conftest import find_data_dir, require_multi30k

    data = require_multi30k(find_data_dir(), ci=os.environ.get("CI") == "true")
    config = tmp_path / "config.yaml"
    text = (
        "# my experiment\ndata: {max_train_pairs: 50, max_valid_pairs: 4}\ntokenizer: {vocab_size: 120}\n"
        "model: {preset: tiny, d_model: 16, n_heads: 2, d_ff: 32, n_encoder_layers: 1, n_decoder_layers: 1}\n"
        "train: {max_steps: 2, max_tokens: 400, progress: false}\nvalid: {every: 2}\n"
    )
    config.write_text(text)
    code, _, err = cli("train", "--config", config, "--output-dir", tmp_path, "--data-dir", data)
    assert code == 0, err
    assert config.read_text() == text
    assert "max_train_pairs: 50" in (tmp_path / "resolved_config.yaml").read_text()


# -- every byte of a checkpoint is checked ---------------------------------------------------------


@pytest.mark.parametrize("damage", ["tokenizer byte", "activation", "step"])
def test_a_change_outside_the_tensors_is_found_on_load(tmp_path, damage):
    path = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    state = torch.load(path, weights_only=True)
    if damage == "tokenizer byte":
        proto = bytearray(state["tokenizer"]["src"])
        proto[len(proto) // 2] ^= 0x01
        state["tokenizer"]["src"] = bytes(proto)
    elif damage == "activation":
        state["model_config"]["activation"] = "gelu"
    else:
        state["step"] = 7
    torch.save(state, path)  # the checksums as they were
    with pytest.raises(CheckpointError, match="damaged"):
        load_checkpoint(path)


def test_the_checksum_is_the_same_in_every_process_and_order(tmp_path):
    from attnkit.checkpoint import content_crc32

    state = {"b": {"y": 1, "x": [1.5, "s", None]}, "a": b"\x00\x01", "t": torch.ones(2)}
    assert content_crc32(state) == content_crc32(
        {"a": b"\x00\x01", "t": torch.zeros(3), "b": {"x": [1.5, "s", None], "y": 1}}
    )
    assert content_crc32(state) != content_crc32({**state, "a": b"\x00\x02"})
    save_checkpoint(
        state | {"arch": "transformer", "model_config": {}, "model": {}, "tokenizer": {}}, tmp_path / "s.pt"
    )
    load_checkpoint(tmp_path / "s.pt")


def test_the_shape_check_loads_as_the_model_does(tmp_path):
    """An older checkpoint's tied output layer (no output_proj.weight) loads: the check runs the
    model's own load path, upgrade hooks included."""
    from attnkit.checkpoint import check_shapes, model_from_checkpoint

    state = load_checkpoint(write_checkpoint(tmp_path / "model.pt", make_tokenizer(0)))
    assert state["model_config"]["tie_output"]
    older = {**state, "model": {k: v for k, v in state["model"].items() if k != "output_proj.weight"}}
    check_shapes(older)
    model_from_checkpoint(older)


def test_a_config_that_does_not_fit_its_weights_allocates_nothing(tmp_path, monkeypatch):
    state = load_checkpoint(write_checkpoint(tmp_path / "model.pt", make_tokenizer(0)))
    state["model_config"] = {**state["model_config"], "d_model": 10**6}  # weights of d_model 16 or so
    path = save_checkpoint(state, tmp_path / "big.pt")  # checksums intact: the config itself is wrong
    import attnkit.checkpoint

    built_on = []  # the device of every model built: only the meta device's shapes, nothing allocated
    real_build = attnkit.checkpoint.build_model

    def watch(arch, config):
        built_on.append(torch.empty(0).device.type)
        return real_build(arch, config)

    monkeypatch.setattr(attnkit.checkpoint, "build_model", watch)
    code, _, err = cli("translate", "--checkpoint", path, stdin=b"Ein Hund.\n")
    assert_user_error(code, err, "do not fit its model config")
    assert built_on == ["meta"]


# -- a resume refuses other training data ----------------------------------------------------------


@pytest.mark.slow
def test_resume_refuses_training_files_changed_under_the_same_paths(tmp_path):
    from fault_helpers import synthetic_sentences

    src, tgt = tmp_path / "train.src", tmp_path / "train.tgt"
    for path, seed in ((src, 0), (tgt, 1)):
        path.write_text("\n".join(synthetic_sentences(400, seed)) + "\n")
    (tmp_path / "valid.src").write_text("\n".join(synthetic_sentences(5, 2)) + "\n")
    (tmp_path / "valid.tgt").write_text("\n".join(synthetic_sentences(5, 3)) + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"data: {{corpus: files, train_files: [{src}, {tgt}], valid_files: [{tmp_path}/valid.src, "
        f"{tmp_path}/valid.tgt]}}\ntokenizer: {{vocab_size: 60}}\n"
        "model: {preset: tiny, d_model: 16, n_heads: 2, d_ff: 32, n_encoder_layers: 1, n_decoder_layers: 1}\n"
        "train: {max_steps: 3, max_tokens: 300, progress: false}\nvalid: {every: 3}\n"
    )
    run = tmp_path / "run"
    code, _, err = cli("train", "--config", config, "--output-dir", run)
    assert code == 0, err
    for path, seed in ((src, 0), (tgt, 1)):
        path.write_text("\n".join(synthetic_sentences(100, seed)) + "\n")
    last = run / "checkpoint_last.pt"
    code, _, err = cli(
        "train", "--config", config, "--output-dir", run, "--resume", last, "train.max_steps=6"
    )
    assert_user_error(code, err, "training data changed", "400", "100")


# -- the HTTP schema is the contract; no process-wide arithmetic -----------------------------------


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from attnkit.serve.app import create_app
    from attnkit.serve.tasks import load_models

    path = write_checkpoint(tmp_path_factory.mktemp("schema") / "model.pt", make_tokenizer(0))
    with TestClient(create_app(load_models([str(path)], device="cpu"))) as c:
        yield c


def test_what_the_schema_calls_an_integer_is_taken(client):
    assert client.post("/v1/translate", json={"text": "Ein Hund.", "beam": 2.0}).status_code == 200
    for bad in (2.5, "2", True):
        r = client.post("/v1/translate", json={"text": "Ein Hund.", "beam": bad})
        assert r.status_code == 422, (bad, r.text)


def test_a_denormal_top_p_is_above_zero_as_the_schema_says(client):
    r = client.post("/v1/translate", json={"text": "Ein Hund.", "sample": True, "top_p": 1e-310})
    assert r.status_code == 200, r.text
    tiny = 1e-310
    assert tiny > 0  # in the test's own thread too, after the server decoded


def test_running_a_command_leaves_ieee_arithmetic(tmp_path):
    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    code, _, err = cli("translate", "--checkpoint", ckpt, stdin=b"Ein Hund.\n")
    assert code == 0, err
    tiny = 1e-310
    assert tiny > 0


def test_the_streamed_answer_is_in_the_schema(tmp_path):
    pytest.importorskip("fastapi")
    from attnkit.model import LMConfig, TransformerLM
    from attnkit.serve.app import create_app
    from attnkit.serve.tasks import load_models

    tok = make_tokenizer(0)
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size)
    state = {"tokenizer": tok.state_dict(), "experiment": {}, "arch": "lm", "model_config": cfg.to_dict()}
    path = save_checkpoint({**state, "model": TransformerLM(cfg).state_dict()}, tmp_path / "lm.pt")
    schema = create_app(load_models([str(path)], device="cpu")).openapi()
    assert "text/event-stream" in schema["paths"]["/v1/generate"]["post"]["responses"]["200"]["content"]


# -- paths, line endings, long lines, bodies that stop ---------------------------------------------


def test_a_path_that_is_not_utf8_is_one_line(tmp_path):
    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    out = os.fsdecode(bytes(tmp_path) + b"/hf\xff")
    code, _, err = cli("export", "--checkpoint", ckpt, "--format", "huggingface", "--output", out)
    assert_user_error(code, err, "not valid UTF-8")


def test_a_name_as_long_as_the_file_system_allows_is_written(tmp_path):
    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    out = tmp_path / ("n" * 251 + ".txt")  # 255 bytes: its temporary name must fit too
    code, _, err = cli("translate", "--checkpoint", ckpt, "--output", out, stdin=b"Ein Hund.\n")
    assert code == 0, err
    assert out.read_text().count("\n") == 1
    code, _, err = cli("translate", "--checkpoint", ckpt, "--output", tmp_path / ("n" * 300), stdin=b"x\n")
    assert_user_error(code, err, "over the")


@pytest.mark.parametrize("where", ["--input", "stdin"])
def test_cr_only_line_endings_are_one_line(tmp_path, where):
    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    text = b"Ein Hund.\rZwei Katzen.\r"
    (tmp_path / "cr.txt").write_bytes(text)
    argv = ["--input", tmp_path / "cr.txt"] if where == "--input" else []
    code, out, err = cli("translate", "--checkpoint", ckpt, *argv, stdin=text)
    assert_user_error(code, err, "carriage return", "cr.txt:1" if where == "--input" else "stdin line 1")
    code, out, err = cli("translate", "--checkpoint", ckpt, stdin=b"Ein Hund.\r\nZwei.\r\n")
    assert code == 0 and out.count("\n") == 2, err
    crawled = tmp_path / "crawled.txt"  # a stray CR deep inside a line of LF-ended text is text
    crawled.write_bytes(b"Ein Hund.\nZwei\rKatzen.\nDrei.\n")
    code, out, err = cli("translate", "--checkpoint", ckpt, "--input", crawled)
    assert code == 0 and out.count("\n") == 3, err


def test_arriving_lines_are_whole_however_the_reads_cut_them():
    from attnkit.tasks.translation.translate_command import arriving_lines

    long_line = b"Hund " * 300_000  # 1.5 MB: many reads before its newline
    data = long_line + b"\nzwei\r\ndrei\n\nvier"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: small writes, as a slow producer gives them
        os.close(r)
        for i in range(0, len(data), 7001):
            os.write(w, data[i : i + 7001])
        os._exit(0)
    os.close(w)
    got = [line for batch in arriving_lines(r) for line in batch]
    os.close(r)
    os.waitpid(pid, 0)
    assert got == [long_line.decode(), "zwei", "drei", "", "vier"]


@pytest.mark.slow
def test_a_body_that_stops_arriving_answers_408(tmp_path):
    from serve_helpers import live_server

    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    with live_server(ckpt, extra=("--request-timeout", "2")) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(
                b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"text": '
            )
            start = time.monotonic()
            answer = b""
            while b"}" not in answer:  # the headers, then the JSON body
                part = s.recv(4096)
                assert part, answer
                answer += part
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"did not arrive within 2 s" in answer
        assert time.monotonic() - start < 15


def test_the_decoder_self_attention_picture_labels_its_keys_as_what_the_decoder_read(tmp_path, monkeypatch):
    """Columns are the decoder's inputs (<s>, then the translation one piece behind), rows what each
    position outputs: each row's weight lies on or left of its diagonal, as the causal mask says."""
    import attnkit.plotting

    drawn = {}

    def capture(weights, keys, queries, out_path, *, title=None):
        drawn[Path(out_path).name] = (weights, list(keys), list(queries))
        return Path(out_path)

    monkeypatch.setattr(attnkit.plotting, "plot_attention", capture)
    ckpt = write_checkpoint(tmp_path / "model.pt", make_tokenizer(0))
    code, _, err = cli(
        "attention", "--checkpoint", ckpt, "--text", "Ein Hund", "--output", tmp_path / "map.png"
    )
    assert code == 0, err
    weights, keys, queries = drawn["map_decoder_self.png"]
    assert keys == ["<s>", *queries[:-1]] and queries[-1] == "</s>"
    assert torch.triu(weights[..., :, :], diagonal=1).abs().max() == 0  # nothing after what it read
