"""The benchmark's peers do equal work: same reference model size, exactly n tokens, no early EOS.

attnkit and torch.nn.Transformer (always installed) on tiny inputs; ``python -m bench.check_peers``
checks every installed peer the same way (HF Marian, CTranslate2, JoeyNMT and OpenNMT-py take
tens of seconds just to import, too slow for the test suite).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from bench import compare, peers
from bench.peers.common import BOS, EOS, PAD, VOCAB, smoothed_loss

N_TOKENS = 5


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def reference():
    torch.manual_seed(0)
    return peers.build("attnkit", VOCAB, PAD, BOS, EOS)


def _src(batch: int = 3, length: int = 6) -> torch.Tensor:
    src = torch.randint(3, VOCAB, (batch, length), generator=torch.Generator().manual_seed(1))
    src[1, length - 2 :] = PAD  # one shorter sentence
    return src


def test_registry_names_every_module_and_rejects_unknown_keys():
    for key, peer in peers.PEERS.items():
        assert importlib.util.find_spec(f"bench.peers.{peer.module}") is not None, key
    assert peers.resolve("transformers") == "hf" and peers.resolve("ctranslate2") == "ct2"
    assert {"attnkit", "torch"} <= set(peers.available())
    with pytest.raises(ValueError, match="unknown peer 'nope'"):
        peers.resolve("nope")


@pytest.mark.parametrize("beam", [1, 4])
def test_attnkit_decodes_exactly_n_tokens_without_eos(reference, beam):
    src = _src()
    out = reference.decode_fn(src, beam_size=beam, n_tokens=N_TOKENS)
    assert out.shape == (src.size(0), N_TOKENS)
    assert not bool((out == EOS).any()) and not bool((out == PAD).any())
    assert not reference.model.training  # decoding leaves the model in eval mode


def test_attnkit_train_step_gives_gradients_and_the_shared_loss_value():
    """attnkit trains with its own (fused) loss; without dropout it must equal the peers' loss."""
    torch.manual_seed(0)
    peer = peers.build("attnkit", VOCAB, PAD, BOS, EOS, dropout=0.0)
    src = _src()
    tgt = torch.randint(3, VOCAB, (3, 5), generator=torch.Generator().manual_seed(2))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:].clone()
    tgt_out[1, -1] = PAD
    loss = peer.train_step_fn(src, tgt_in, tgt_out)
    assert torch.isfinite(loss) and not loss.requires_grad
    assert all(p.grad is not None for p in peer.parameters())
    peer.model.eval()
    with torch.no_grad():
        expected = smoothed_loss(peer.model(src, tgt_in), tgt_out, PAD)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_torch_peer_is_the_reference_size_and_decodes_n_tokens(reference):
    torch.manual_seed(0)
    peer = peers.build("torch", VOCAB, PAD, BOS, EOS)
    assert peer.n_params == reference.n_params
    out = peer.decode_fn(_src(), beam_size=1, n_tokens=N_TOKENS)
    assert out.shape == (3, N_TOKENS) and not bool((out == EOS).any())


def test_compare_divides_attnkit_by_the_yardstick_of_the_same_run():
    def run(attnkit: float, marian: float, ct2: float) -> dict:
        def speed(x):
            return {"median": x, "best": 2 * x}

        return {
            "train": {"random": {"attnkit": speed(attnkit), "transformers-marian": speed(marian)}},
            "decode": {"greedy": {"attnkit": speed(attnkit), "ctranslate2-float32": speed(ct2)}},
        }

    rows = compare.ratios(run(300.0, 200.0, 400.0))
    assert rows == {"training random": (1.5, 1.5), "decoding greedy": (0.75, 0.75)}
    text = compare.table({"before": run(300.0, 200.0, 400.0), "after": {"train": {}, "decode": {}}})
    assert "| training random vs HF Marian | 1.50x (best 1.50x) | n/a |" in text


def test_decode_study_orders_checkpoints_by_step_and_bolds_the_best_per_split(tmp_path):
    from bench.studies.decode_study import markdown, step_checkpoints

    for step in (1000, 200, 30):  # lexical order would put 1000 before 200 and 30 last
        (tmp_path / f"checkpoint_step{step}.pt").write_bytes(b"")
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    assert [p.name for p in step_checkpoints(tmp_path)] == [
        "checkpoint_step30.pt",
        "checkpoint_step200.pt",
        "checkpoint_step1000.pt",
    ]
    score = lambda b: {"bleu": b, "bleu_lc": b + 0.2, "chrf": 60.0}  # noqa: E731
    rows = [
        {"average": 1, "beam": 4, "length_penalty": 0.6, "val": score(40.0), "test": score(39.0)},
        {"average": 5, "beam": 4, "length_penalty": 1.0, "val": score(41.0), "test": score(38.5)},
    ]
    table = markdown(rows, ["val", "test"]).splitlines()
    assert "| 1 | 4 | 0.6 | 40.0 |" in table[2] and "**39.0**" in table[2]  # test's best is row 1
    assert "**41.0**" in table[3] and "| 38.5 |" in table[3]  # val's best is row 2


def test_recipe_study_rows_are_valid_configs_and_deltas_are_against_the_base():
    from bench.studies.recipe_study import ROOT, ROWS, markdown

    from attnkit.checkpoint import ARCHS
    from attnkit.train import load_config

    for name, (_, overrides) in ROWS.items():  # a bad key or value fails here, not an hour into a run
        cfg = load_config(ROOT / "configs/multi30k_de_en_tiny.yaml", overrides)
        for item in overrides:
            section, rest = item.split(".", 1)
            key, value = rest.split("=", 1)
            part = getattr(cfg, section)  # the model section stays a mapping until the arch builds it
            if isinstance(part, dict):
                assert key in ARCHS[cfg.arch][1].field_names(), (name, item)
            got = part[key] if isinstance(part, dict) else getattr(part, key)
            assert str(got).lower() == value.lower(), (name, item)

    def row(name, lc):
        greedy = {"bleu": lc - 0.3, "bleu_lowercase": lc, "chrf": 55.0}
        return {
            "row": name,
            "change": ROWS[name][0],
            "params": 1000,
            "steps": 900,
            "val_bleu": 30.0,
            "greedy": greedy,
        }

    meta = dict(pair="de-en", config="c.yaml", minutes=8, threads=1, jobs=2, machine="m", command="x")
    table = markdown([row("base", 30.0), row("seed2", 30.4), row("dropout_0.3", 28.5)], meta)
    lines = table.splitlines()
    assert lines[4].startswith("| base |") and lines[4].endswith("|  |")  # no delta for the base itself
    assert lines[5].endswith("| +0.40 |") and lines[6].endswith("| -1.50 |")
    assert "Seed noise (|seed2 - base|, lc BLEU): 0.40." in table


def test_every_attnkit_name_a_benchmark_imports_exists():
    """A benchmark script imports what attnkit has now (a name moved or renamed breaks it here, not
    on the GPU machine): every ``from attnkit... import NAME`` in bench/ resolves."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    missing = []
    for path in sorted((root / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attnkit")):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if hasattr(module, alias.name):
                    continue
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    missing.append(f"{path.relative_to(root)}:{node.lineno} {node.module}.{alias.name}")
    assert not missing, missing


@pytest.mark.slow
def test_serve_load_runs_with_a_key_and_every_request_passes_it(tmp_path):
    """bench.serve_load --api-key: the server asks every request for a key and the load's clients
    bear it (no 401); a bounded run on the tiny fixture, not a measurement."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from conftest import find_data_dir

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "load.json"
    argv = ["--checkpoint", str(root / "tests/fixtures/c46ef86/translation_step3.pt"), "--sentences", "6"]
    argv += ["--data-dir", str(find_data_dir()), "--clients", "1,2", "--api-key", "--max-seconds", "30"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.serve_load", *argv, "--out", str(out)],
        cwd=root, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert "an API key asked of every request" in result["server"]
    for level in result["levels"]:
        assert level["answered"] > 0 and not any("HTTP 401" in e for e in level["first_errors"]), level
