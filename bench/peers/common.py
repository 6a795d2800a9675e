"""What every peer shares: the reference model, the benchmark's token ids, the loss, the adapter.

The reference model is the one every peer builds: d_model 256, 4 heads, FFN 1024, 3 encoder +
3 decoder layers, one shared vocabulary of 8000, dropout 0.1 on embeddings and sublayer outputs,
tied embeddings (source = target = output projection), ReLU, post-norm, sinusoidal positions.

Every trainable peer computes the same loss on its logits (:func:`smoothed_loss`): token-level
cross entropy with label smoothing 0.1, pad ignored, summed and divided by the number of non-pad
target tokens, through PyTorch's ``F.cross_entropy(label_smoothing=0.1)``. That is what
OpenNMT-py 3.5's loss calls, and as fast as or faster than HF's ``LabelSmoother`` and JoeyNMT's
``XentLoss``, so no peer is slowed by its loss. attnkit trains with its own fused loss (the same
value), as its trainer does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# The reference model (bench/PEERS.md). REFERENCE uses attnkit's TransformerConfig names.
VOCAB = 8000
PAD, BOS, EOS = 0, 1, 2  # the benchmark's special ids (attnkit's tokenizer uses the same)
D_MODEL, N_HEADS, D_FF = 256, 4, 1024
N_ENC, N_DEC = 3, 3
DROPOUT = 0.1
LABEL_SMOOTHING = 0.1
MAX_LEN = 512
REFERENCE = dict(d_model=D_MODEL, n_heads=N_HEADS, d_ff=D_FF, n_encoder_layers=N_ENC, n_decoder_layers=N_DEC)
BASE = dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6)  # paper Table 3
BIG = dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6)  # Table 3


def marian_sizes(dims: dict) -> dict:
    """MarianConfig overrides for a model of attnkit's ``dims`` (d_model, n_heads, d_ff, layers)."""
    return dict(
        d_model=dims["d_model"],
        encoder_layers=dims["n_encoder_layers"],
        decoder_layers=dims["n_decoder_layers"],
        encoder_attention_heads=dims["n_heads"],
        decoder_attention_heads=dims["n_heads"],
        encoder_ffn_dim=dims["d_ff"],
        decoder_ffn_dim=dims["d_ff"],
        init_std=dims["d_model"] ** -0.5,
    )


TrainStepFn = Callable[[Tensor, Tensor, Tensor], Tensor]
DecodeFn = Callable[..., Tensor]


@dataclass
class PeerAdapter:
    """A peer's model behind one interface.

    train_step_fn(src (B,S), tgt_in (B,T), tgt_out (B,T)) -> detached loss: sets train mode, runs
    forward + loss + backward (no optimizer step, no zero_grad). None for inference-only peers.
    decode_fn(src (B,S), beam_size=1, n_tokens=30) -> LongTensor (B, n_tokens), in eval mode
    without gradients, exactly n_tokens tokens per sentence (EOS forbidden until then, so every
    peer does equal work whatever the random weights predict); beam sizes in ``decode_beams``.
    """

    name: str
    version: str
    model: Any
    n_params: int
    notes: str
    train_step_fn: TrainStepFn | None = None
    decode_fn: DecodeFn | None = None
    decode_beams: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def parameters(self) -> list[nn.Parameter]:
        """Trainable parameters for the optimizer the benchmark adds (empty for inference-only)."""
        if isinstance(self.model, nn.Module):
            return [p for p in self.model.parameters() if p.requires_grad]
        return []


def count_trainable(model: nn.Module) -> int:
    """Parameters that require grad; ``Module.parameters()`` yields a shared tensor once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def smoothed_loss(logits: Tensor, tgt_out: Tensor, pad_id: int, epsilon: float = LABEL_SMOOTHING) -> Tensor:
    """Mean over non-pad target tokens of label-smoothed cross entropy; logits (B, T, V), tgt_out (B, T)."""
    logits = logits.reshape(-1, logits.size(-1)).float()  # (B*T, V)
    target = tgt_out.reshape(-1)  # (B*T,)
    loss = F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=epsilon, reduction="sum")
    return loss / (target != pad_id).sum().clamp(min=1)


def sinusoidal(max_len: int, d_model: int) -> Tensor:
    """(max_len, d_model): PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (paper 3.5)."""
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (L, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def eos_banned_argmax(logits: Tensor, eos_id: int) -> Tensor:
    """Greedy choice (N,) from logits (N, V) with EOS forbidden."""
    logits = logits.clone()
    logits[:, eos_id] = float("-inf")
    return logits.argmax(-1)
