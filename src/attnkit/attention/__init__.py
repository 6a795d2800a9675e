"""Attention from first principles to multi-head attention; every mask comes from :mod:`.masks`."""

from .cache import KVCache, SlotCache
from .functional import attention_scores, basic_self_attention, scaled_dot_product_attention
from .layout import FixedLayout
from .masks import causal_mask, combine_masks, padding_mask, real_tokens
from .multihead import MultiHeadAttention
from .positions import RelativePositions, RotaryPositions, attention_positions
from .recurrent import AdditiveAttention, MultiplicativeAttention

__all__ = [
    "AdditiveAttention",
    "attention_positions",
    "attention_scores",
    "FixedLayout",
    "KVCache",
    "MultiHeadAttention",
    "MultiplicativeAttention",
    "RelativePositions",
    "RotaryPositions",
    "SlotCache",
    "basic_self_attention",
    "causal_mask",
    "combine_masks",
    "padding_mask",
    "real_tokens",
    "scaled_dot_product_attention",
]
