"""Attention from first principles to multi-head attention; every mask comes from :mod:`.masks`."""

from .functional import attention_scores, basic_self_attention, scaled_dot_product_attention
from .masks import causal_mask, combine_masks, padding_mask, real_tokens
from .multihead import KVCache, MultiHeadAttention
from .recurrent import AdditiveAttention, MultiplicativeAttention

__all__ = [
    "AdditiveAttention",
    "attention_scores",
    "KVCache",
    "MultiHeadAttention",
    "MultiplicativeAttention",
    "basic_self_attention",
    "causal_mask",
    "combine_masks",
    "padding_mask",
    "real_tokens",
    "scaled_dot_product_attention",
]
