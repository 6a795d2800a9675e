"""Head analysis (attnkit.heads): gates of 1 change nothing, gates of 0 take a kind of attention out
of the computation, and the gradient importance is the derivative a finite difference measures."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnkit.errors import ConfigError
from attnkit.heads import (
    attention_heads,
    counts,
    gated,
    gradient_importance,
    masked,
    shapes,
    weight_statistics,
)
from attnkit.loss import LossOutput
from attnkit.model import RNNConfig, RNNSeq2Seq, Transformer, TransformerConfig

PAD = 0


def tiny(dtype=torch.float32) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig.preset("tiny", src_vocab_size=30, tgt_vocab_size=30, dropout=0.0)
    return Transformer(cfg).to(dtype).eval()


def data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 30, (3, 7), generator=g)
    src[1, 5:] = PAD
    tgt = torch.randint(3, 30, (3, 6), generator=g)
    tgt[2, 4:] = PAD
    return src, tgt


def test_every_kind_is_found_with_its_layers_and_heads():
    model = tiny()
    cfg = model.config
    assert shapes(model) == {
        "encoder": (cfg.n_encoder_layers, cfg.n_heads),
        "decoder": (cfg.n_decoder_layers, cfg.n_heads),
        "cross": (cfg.n_decoder_layers, cfg.n_heads),
    }


def test_gates_of_one_change_nothing_and_are_gone_after_the_block():
    model, (src, tgt) = tiny(), data()
    with torch.no_grad():
        plain = model(src, tgt)
        with gated(model, {k: torch.ones(L, H) for k, (L, H) in shapes(model).items()}):
            ones = model(src, tgt)
    assert torch.equal(plain, ones)
    assert all(m.head_gate is None for ms in attention_heads(model).values() for m in ms)


def test_masking_every_cross_head_leaves_nothing_of_the_source():
    """Without cross-attention the decoder cannot see the source: another source, the same logits."""
    model, (src, tgt) = tiny(), data()
    other = torch.randint(3, 30, src.shape, generator=torch.Generator().manual_seed(5))
    L, H = shapes(model)["cross"]
    with torch.no_grad(), gated(model, {"cross": torch.zeros(L, H)}):
        a, b = model(src, tgt), model(other, tgt)
    torch.testing.assert_close(a, b)
    with torch.no_grad():
        assert not torch.allclose(model(src, tgt), model(other, tgt))  # with it, the source matters


def test_masking_every_encoder_head_makes_the_encoder_position_wise():
    """Without self-attention each source position's memory depends on that token alone."""
    model, (src, _) = tiny(), data()
    changed = src.clone()
    changed[0, 0] = (src[0, 0] + 1) % 27 + 3  # another first token
    L, H = shapes(model)["encoder"]
    with torch.no_grad(), gated(model, {"encoder": torch.zeros(L, H)}):
        a, b = model.encode(src).memory, model.encode(changed).memory
    torch.testing.assert_close(a[0, 1:], b[0, 1:])  # the other positions did not hear of it
    assert not torch.allclose(a[0, 0], b[0, 0])


def test_gradient_importance_is_the_finite_difference_of_the_loss():
    model, (src, tgt) = tiny(torch.float64), data()
    tgt_in = torch.cat([torch.full((3, 1), 1), tgt[:, :-1]], 1)

    def loss_of(_batch):  # in float64 throughout (attnkit's loss takes its log-softmax in float32)
        logits = model(src, tgt_in)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD, reduction="sum")
        return LossOutput(loss, loss.detach(), (tgt != PAD).sum())

    importance = gradient_importance(model, [None], loss_of)
    n_tokens = int((tgt != PAD).sum())
    eps = 1e-6
    for kind, layer, head in (("encoder", 0, 1), ("decoder", 1, 0), ("cross", 0, 3), ("cross", 1, 2)):
        L, H = shapes(model)[kind]
        values = []
        for delta in (eps, -eps):
            gates = torch.ones(L, H, dtype=torch.float64)
            gates[layer, head] += delta
            with torch.no_grad(), gated(model, {kind: gates}):
                values.append(loss_of(None).loss.item())
        numeric = abs(values[0] - values[1]) / (2 * eps) / n_tokens
        assert importance[kind][layer, head].item() == pytest.approx(numeric, rel=1e-4, abs=1e-9)
    assert all(p.requires_grad for p in model.parameters())  # given back as they were


def test_masking_one_head_changes_the_output_and_statistics_are_in_range():
    model, (src, tgt) = tiny(), data()
    with torch.no_grad():
        plain = model(src, tgt)
        with gated(model, masked(model, "cross", 0, 1)):
            assert not torch.allclose(model(src, tgt), plain)
    with torch.no_grad(), weight_statistics(model) as stats:
        model(src, tgt)
    for kind, (L, H) in shapes(model).items():
        conf, ent = stats[kind]["confidence"], stats[kind]["entropy"]
        assert conf.shape == ent.shape == (L, H)
        assert ((conf > 0) & (conf <= 1 + 1e-6)).all() and (ent >= 0).all()
        assert (ent <= torch.log(torch.tensor(float(src.size(1) + tgt.size(1)))) + 1e-5).all()


def test_a_model_without_heads_is_refused_in_one_line():
    model = RNNSeq2Seq(RNNConfig.preset("tiny", src_vocab_size=20, tgt_vocab_size=20))
    with pytest.raises(ConfigError, match="no multi-head attention") as e:
        attention_heads(model)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_the_heads_command_scores_every_head_of_a_checkpoint(runs, tmp_path, capsys):
    import json

    from cli_helpers import assert_user_error, cli

    out = tmp_path / "heads"
    code, printed, err = cli(capsys, "heads", "--checkpoint", runs.ckpt, "--out", out, "--max-sentences", 12)
    assert code == 0, err
    result = json.loads((out / "heads.json").read_text())
    rows = result["heads"]
    assert result["metric"] == "bleu" and result["bleu"] is not None
    assert {r["kind"] for r in rows} == {"encoder", "decoder", "cross"}
    assert len(rows) == len((out / "heads.csv").read_text().splitlines()) - 1 == 24  # 3 kinds x 2 x 4
    assert all(r["importance"] >= 0 and 0 < r["confidence"] <= 1 and r["bleu_drop"] is not None for r in rows)
    assert (out / "heads.png").read_bytes()[:4] == b"\x89PNG"
    assert "24/24 cross layer 2 head 4" in err  # the progress, one line per head
    code, _, err = cli(capsys, "heads", "--checkpoint", runs.rnn_ckpt, "--out", tmp_path / "rnn")
    assert_user_error(code, err, "no multi-head attention")


def test_attention_method_rollout_and_flow_draw_a_translation_s_maps(runs, tmp_path, capsys):
    from cli_helpers import cli

    for method in ("rollout", "flow"):
        out = tmp_path / f"{method}.png"
        code, printed, err = cli(
            capsys,
            "attention",
            "--checkpoint",
            runs.ckpt,
            "--text",
            "Ein Hund.",
            "--out",
            out,
            "--method",
            method,
        )
        assert code == 0, err
        assert out.is_file() and (tmp_path / f"{method}_encoder_self.png").is_file()


def test_a_physically_pruned_model_computes_what_the_masked_one_did():
    from attnkit.checkpoint import build_model
    from attnkit.heads import prune_heads, removed_heads

    model, (src, tgt) = tiny(), data()
    gates = {"encoder": torch.ones(2, 4), "cross": torch.ones(2, 4)}
    gates["encoder"][0, 1] = gates["encoder"][1, 0] = gates["encoder"][1, 3] = 0.0
    gates["cross"][1, 2] = 0.0
    with torch.no_grad(), gated(model, gates):
        masked_out = model(src, tgt)
    removed = removed_heads(model, gates)
    assert removed == {"encoder": [[1], [0, 3]], "cross": [[], [2]]}
    before = sum(p.numel() for p in model.parameters())
    prune_heads(model, removed)
    assert counts(model) == {"encoder": [3, 2], "decoder": [4, 4], "cross": [4, 3]}
    assert sum(p.numel() for p in model.parameters()) < before
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), masked_out)
    # a config that says so rebuilds the pruned shapes, so its weights load (every command, init_from)
    config = {**model.config.to_dict(), "pruned_heads": removed}
    rebuilt = build_model("transformer", config)
    rebuilt.load_state_dict(model.state_dict())
    rebuilt.eval()
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(src, tgt), masked_out)


def test_pruning_nothing_changes_nothing_bit_for_bit():
    from attnkit.heads import prune_heads

    model, (src, tgt) = tiny(), data()
    with torch.no_grad():
        before = model(src, tgt)
        prune_heads(model, {"encoder": [[], []]})
        assert torch.equal(model(src, tgt), before)


@pytest.mark.slow
def test_prune_removes_heads_writes_its_curve_and_every_command_takes_the_result(
    runs, tmp_path, capsys, monkeypatch
):
    import json

    from attnkit.checkpoint import load_checkpoint
    from cli_helpers import assert_user_error, cli, cli_stdin

    out = tmp_path / "pruned.pt"
    args = ["prune", "--checkpoint", runs.ckpt, "--output", out, "--max-sentences", 12]
    code, printed, err = cli(capsys, *args, "--fraction", 0.25)
    assert code == 0, err
    assert "6 of 24 heads pruned" in printed
    curve = json.loads((tmp_path / "pruned.curve.json").read_text())["curve"]
    assert [r["pruned"] for r in curve] == list(range(7)) and curve[0]["head"] is None
    assert (tmp_path / "pruned.curve.png").is_file() and (tmp_path / "pruned.curve.csv").is_file()
    state = load_checkpoint(out)
    removed = state["model_config"]["pruned_heads"]
    assert sum(len(heads) for layers in removed.values() for heads in layers) == 6
    assert "optimizer" not in state
    # every command that reads a checkpoint takes it; an export format that cannot hold it says so
    code, translated, err = cli_stdin(capsys, monkeypatch, b"Ein Hund.\n", "translate", "--checkpoint", out)
    assert code == 0 and translated.strip(), err
    code, _, err = cli(
        capsys, "export", "--checkpoint", out, "--format", "ctranslate2", "--output", tmp_path / "ct2"
    )
    assert_user_error(code, err, "pruned heads")
    code, _, err = cli(
        capsys, "prune", "--checkpoint", out, "--output", tmp_path / "again.pt", "--fraction", 0.1
    )
    assert_user_error(code, err, "pruned already")
    code, _, err = cli(capsys, *args, "--floor", 1000, "--force")
    assert_user_error(code, err, "already past --floor")
    code, _, err = cli(capsys, *args, "--fraction", 1.5)
    assert code == 2 and "--fraction" in err


@pytest.mark.slow
def test_a_pruned_checkpoint_fine_tunes(runs, tmp_path, capsys, shared_data):
    from attnkit.checkpoint import load_checkpoint
    from attnkit.train import load_config, train
    from cli_helpers import cli

    out = tmp_path / "pruned.pt"
    code, _, err = cli(
        capsys, "prune", "--checkpoint", runs.ckpt, "--output", out, "--fraction", 0.2, "--max-sentences", 8
    )
    assert code == 0, err
    overrides = [f"data.data_dir={shared_data}", "data.max_train_pairs=100", "data.max_valid_pairs=5"]
    overrides += [f"train.init_from={out}", "train.max_steps=3", "train.progress=false", "valid.every=3"]
    train(load_config(None, [*overrides, f"output_dir={tmp_path / 'ft'}"]), log=lambda m: None)
    tuned = load_checkpoint(tmp_path / "ft" / "checkpoint_last.pt")
    assert tuned["model_config"]["pruned_heads"] == load_checkpoint(out)["model_config"]["pruned_heads"]


@pytest.mark.slow
def test_an_rnn_s_attention_payload_has_no_heads_to_score(runs):
    from attnkit.tasks.translation import Translator
    from attnkit.tasks.translation.attention_payload import attention_payload

    payload = attention_payload(Translator.from_checkpoint(runs.rnn_ckpt, device="cpu"), "Ein Hund.", beam=1)
    assert "heads" not in payload and set(payload["attention"]) == {"cross"}
    assert "rollout" not in payload["attention"]["cross"]  # no encoder self-attention to follow
