"""attnkit's Transformer behind the peers' adapter: the reference every speed ratio is taken against.

Training and decoding go through attnkit's public API with the fast edges a user's run gets
(attnkit.fast): the trainer's fused loss and cheaper dropout masks, the Translator's packed decoding
weights. Equal work is asked of the searches directly: ``min_len`` bans EOS until ``n_tokens`` tokens,
and ``max_len_b = n_tokens + 1`` (EOS included) ends every hypothesis right after them.
"""

from __future__ import annotations

import importlib.metadata

import torch
from torch import Tensor

import attnkit
from attnkit import fast
from attnkit.decoding import beam_search, greedy_search
from attnkit.linear_loss import ChunkedLoss, output_loss
from attnkit.loss import LossOutput
from attnkit.model import Transformer, TransformerConfig, count_parameters

from .common import DROPOUT, LABEL_SMOOTHING, REFERENCE, PeerAdapter

NAME = "attnkit"


def version() -> str:
    """The installed distribution's version, else the imported package's (run from a source tree)."""
    try:
        return importlib.metadata.version("attnkit")
    except importlib.metadata.PackageNotFoundError:
        return attnkit.__version__


def build(
    vocab_size: int = 8000,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    dims: dict | None = None,
    device: str = "cpu",
    dropout: float = DROPOUT,
    model: Transformer | None = None,
    chunk: int = 0,
    compile_backend: str | None = None,
) -> PeerAdapter:
    """attnkit's Transformer of the reference size (or ``dims``, e.g. the paper's base) on ``device``;
    or ``model`` as it is (one loaded from a checkpoint, say: its config gives the padding id).
    Its training step is the trainer's: ``chunk`` is ``train.output_loss_chunk``, and
    ``compile_backend`` compiles forward and loss as ``train.compile`` does."""
    if model is None:
        cfg = TransformerConfig(
            **(dims or REFERENCE),
            dropout=dropout,
            src_vocab_size=vocab_size,
            tgt_vocab_size=vocab_size,
            share_vocab=True,
            tie_output=True,
            pad_id=pad_id,
            bos_id=bos_id,
            eos_id=eos_id,
        )
        model = Transformer(cfg)
    else:
        pad_id = model.config.pad_id
    model = model.to(device)

    loss_fn = ChunkedLoss(chunk) if chunk else fast.label_smoothed_cross_entropy

    def loss_of(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> LossOutput:
        return output_loss(model, (src, tgt_in), tgt_out, loss_fn, epsilon=LABEL_SMOOTHING, pad_id=pad_id)

    step_loss = torch.compile(loss_of, dynamic=True, backend=compile_backend) if compile_backend else loss_of

    def train_step(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        model.train()
        with fast.fast_dropout(model):  # as attnkit's trainer runs a step
            out = step_loss(src, tgt_in, tgt_out)
            loss = out.loss / out.n_tokens
            loss.backward()
        return loss.detach()

    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        model.eval()
        limit = dict(max_len_a=0, max_len_b=n_tokens + 1, min_len=n_tokens)
        with torch.no_grad(), fast.packed_linears(model):  # as the Translator decodes
            if beam_size == 1:
                hyps = greedy_search(model, src, **limit)
            else:
                hyps = [nbest[0] for nbest in beam_search(model, src, beam_size=beam_size, **limit)]
        return torch.tensor([h.tokens for h in hyps], dtype=torch.long)  # (B, n_tokens)

    notes = (
        "attnkit Transformer (post-norm, sinusoidal, ReLU, biases, shared + tied embeddings). Training: "
        "attnkit.fast's fused label-smoothed loss (or train.output_loss_chunk's) and fast_dropout, as "
        "attnkit's trainer. Decoding: "
        "greedy_search / beam_search (KV cache, finished sentences leave the batch) with "
        "min_len=n_tokens, max_len_b=n_tokens + 1, inside attnkit.fast.packed_linears as the Translator."
    )
    return PeerAdapter(NAME, version(), model, count_parameters(model), notes, train_step, decode, (1, 4))
