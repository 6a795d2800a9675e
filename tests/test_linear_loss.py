"""The chunked output layer + label-smoothed loss (attnkit.linear_loss) equals the plain one: the same
loss, NLL and token count, and the same gradients for the hidden states, the weight and the bias,
whatever the chunk; padding gets no gradient; its backward only scales what the forward computed."""

from __future__ import annotations

import csv

import pytest
import torch
import torch.nn.functional as F

from attnkit.linear_loss import ChunkedLoss, linear_label_smoothed_cross_entropy, output_loss
from attnkit.loss import label_smoothed_cross_entropy
from attnkit.model.captioner import CaptionTransformer
from attnkit.model.config import CaptionerConfig, LMConfig, TransformerConfig
from attnkit.model.lm import TransformerLM
from attnkit.model.transformer import Transformer

PAD = 0


def case(dtype=torch.float64, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    B, T, D, V = 3, 7, 16, 50
    hidden = torch.randn(B, T, D, generator=g, dtype=dtype, requires_grad=True)
    weight = torch.randn(V, D, generator=g, dtype=dtype, requires_grad=True)
    b = torch.randn(V, generator=g, dtype=dtype, requires_grad=True) if bias else None
    target = torch.randint(1, V, (B, T), generator=g)
    target[0, 5:] = PAD  # padding at the end of a sentence
    target[2, 3:] = PAD
    return hidden, weight, b, target


@pytest.mark.parametrize("chunk", [1, 4, 8, 21, 4096])
@pytest.mark.parametrize("bias", [True, False])
def test_loss_and_gradients_equal_the_plain_path(chunk, bias):
    hidden, weight, b, target = case(bias=bias)
    plain = label_smoothed_cross_entropy(F.linear(hidden, weight, b), target, epsilon=0.1, pad_id=PAD)
    (plain.loss / plain.n_tokens).backward()
    want = [p.grad.clone() for p in (hidden, weight, b) if p is not None]
    for p in (hidden, weight, b):
        if p is not None:
            p.grad = None
    fused = linear_label_smoothed_cross_entropy(
        hidden, weight, target, epsilon=0.1, pad_id=PAD, bias=b, chunk=chunk
    )
    (fused.loss / fused.n_tokens).backward()
    got = [p.grad for p in (hidden, weight, b) if p is not None]
    assert fused.n_tokens == plain.n_tokens
    # float64 throughout: equal to rounding (the plain path's log-softmax runs in float32)
    torch.testing.assert_close(fused.loss, plain.loss.double(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(fused.nll, plain.nll.double(), rtol=1e-6, atol=1e-6)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    assert hidden.grad[0, 5:].abs().max() == 0 and hidden.grad[2, 3:].abs().max() == 0  # padding


def test_float32_and_bf16_hidden_states_follow_the_plain_path():
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        hidden, weight, b, target = case(dtype=torch.float32)
        h = hidden.detach().to(dtype).requires_grad_()
        plain = label_smoothed_cross_entropy(
            F.linear(h, weight.to(dtype), b.to(dtype)), target, epsilon=0.1, pad_id=PAD
        )
        fused = linear_label_smoothed_cross_entropy(
            h, weight, target, epsilon=0.1, pad_id=PAD, bias=b, chunk=5
        )
        torch.testing.assert_close(fused.loss, plain.loss.float(), rtol=tol, atol=tol)
        fused.loss.backward()
        assert h.grad.dtype == dtype and weight.grad.dtype == torch.float32


def test_epsilon_zero_is_the_cross_entropy():
    hidden, weight, b, target = case()
    fused = linear_label_smoothed_cross_entropy(
        hidden, weight, target, epsilon=0.0, pad_id=PAD, bias=b, chunk=3
    )
    logits = F.linear(hidden, weight, b).reshape(-1, weight.size(0))
    want = F.cross_entropy(logits, target.reshape(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(fused.loss.double(), want.double())
    torch.testing.assert_close(fused.nll.double(), want.double())


@pytest.mark.parametrize("arch", ["transformer", "lm", "captioner"])
def test_each_model_with_an_output_layer_gives_the_plain_loss_through_output_loss(arch):
    """output_loss with a ChunkedLoss (the hidden states, then the layer a chunk at a time) equals
    the loss of the model's logits, and so do the gradients of every parameter."""
    model, inputs, target = tiny_model(arch)
    plain = output_loss(model, inputs, target, label_smoothed_cross_entropy, epsilon=0.1, pad_id=PAD)
    plain.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    chunked = output_loss(model, inputs, target, ChunkedLoss(5), epsilon=0.1, pad_id=PAD)
    chunked.loss.backward()
    torch.testing.assert_close(chunked.loss, plain.loss)
    torch.testing.assert_close(chunked.nll, plain.nll)
    assert chunked.n_tokens == plain.n_tokens
    for name, p in model.named_parameters():
        if name in grads:
            torch.testing.assert_close(p.grad, grads[name], atol=1e-5, rtol=1e-4, msg=name)


def tiny_model(arch: str):
    """A small model of ``arch`` with dropout off, its inputs and targets (padding included)."""
    torch.manual_seed(0)
    tokens = torch.randint(3, 40, (2, 6))
    target = torch.randint(3, 40, (2, 6))
    target[1, 4:] = PAD
    common = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0, pad_id=PAD)
    if arch == "transformer":
        layers = dict(n_encoder_layers=1, n_decoder_layers=1)
        cfg = TransformerConfig(src_vocab_size=40, tgt_vocab_size=40, share_vocab=False, **layers, **common)
        return Transformer(cfg), (tokens, tokens), target
    if arch == "lm":
        return (
            TransformerLM(LMConfig(vocab_size=40, n_layers=1, tie_output=False, **common)),
            (tokens,),
            target,
        )
    cfg = CaptionerConfig(
        tgt_vocab_size=40, n_encoder_layers=1, n_decoder_layers=1, image_size=16, patch_size=8, **common
    )
    return CaptionTransformer(cfg), (torch.rand(2, 3, 16, 16), tokens), target


@pytest.mark.slow
def test_training_with_the_chunked_loss_follows_the_plain_one(tmp_path, shared_data):
    """train.output_loss_chunk: the same losses step by step (to float tolerance) as the plain loss."""
    from attnkit.train import load_config, train

    def run(name: str, *extra: str) -> list[float]:
        cfg = load_config(
            None, [f"data.data_dir={shared_data}", *TINY, f"output_dir={tmp_path / name}", *extra]
        )
        result = train(cfg, log=lambda m: None)
        with result.metrics_csv.open() as f:
            return [float(r["train_loss"]) for r in csv.DictReader(f) if r["train_loss"]]

    plain, chunked = run("plain"), run("chunked", "train.output_loss_chunk=64")
    assert len(plain) == 6
    assert chunked == pytest.approx(plain, rel=1e-4)


def test_a_model_without_hidden_states_before_an_output_layer_is_refused_in_one_line(tmp_path, shared_data):
    from attnkit.errors import ConfigError
    from attnkit.train import load_config, train

    overrides = [
        f"data.data_dir={shared_data}",
        *TINY,
        f"output_dir={tmp_path}",
        "train.output_loss_chunk=64",
    ]
    with pytest.raises(ConfigError, match="train.output_loss_chunk: a RNNSeq2Seq cannot") as e:
        train(
            load_config(None, [*overrides, "model.arch=rnn", "model.share_vocab=false"]), log=lambda m: None
        )
    assert "\n" not in str(e.value)


TINY = [
    "data.max_train_pairs=200",
    "data.max_valid_pairs=10",
    "tokenizer.vocab_size=300",
    "model.preset=tiny",
    "model.share_vocab=true",
    "train.max_tokens=600",
    "train.schedule=inverse_sqrt",
    "train.lr=0.003",
    "train.warmup_steps=3",
    "train.max_steps=6",
    "train.log_every=1",
    "train.progress=false",
    "valid.every=100",
]
