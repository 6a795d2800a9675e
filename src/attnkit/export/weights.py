"""attnkit's Transformer weights under neutral, paper-like names: the ONE place that knows attnkit's
parameter names, shared by every exporter and importer.

Logical names (L = layer index; every attention has q, k, v, out; every norm and linear has weight
and bias; biases are absent when ``config.bias`` is false):

    src_embed, tgt_embed                       (V, D) token embeddings (the same tensor when shared)
    src_positions, tgt_positions               (max_len, D) the table added after scaling by sqrt(D)
    encoder.L.self_attn.{q,k,v,out}            (D, D) weights in ``nn.Linear`` layout (out, in)
    encoder.L.self_attn_norm, encoder.L.ffn_norm
    encoder.L.ffn.{w1,w2}                      (d_ff, D) and (D, d_ff)
    decoder.L.self_attn.*, decoder.L.cross_attn.*, decoder.L.ffn.*
    decoder.L.{self_attn,cross_attn,ffn}_norm
    encoder.final_norm, decoder.final_norm     pre-norm only
    {encoder,decoder}.L.self_attn.rel_k        (2 clip + 1, Dh) Shaw et al.'s w^K (positional relative)
    {encoder,decoder}.L.self_attn.rel_v        (2 clip + 1, Dh) w^V (relative_values)
    output.weight                              (V_tgt, D) the pre-softmax projection (tied: tgt_embed)
    output.bias                                (V_tgt,) when the model has one

The language model (``TransformerLM``) uses the decoder's names without cross-attention: tgt_embed,
tgt_positions, decoder.L.{self_attn,ffn}.*, decoder.L.{self_attn,ffn}_norm, decoder.final_norm,
output.* (:func:`lm_name_table`).

``logical_weights(model)`` reads them; ``attnkit_state_dict(logical, config)`` is the inverse.
Legend: D d_model, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor, nn

from ..errors import CheckpointError, ConfigError
from ..model import LMConfig, Transformer, TransformerConfig, TransformerLM
from ..positional import sinusoidal_encoding


def _attention(logical: str, attnkit: str, d: int, bias: bool) -> Iterator[tuple[str, str, slice | None]]:
    """W^Q is ``q_proj``; W^K and W^V are stacked in ``kv_proj`` (rows [W^K; W^V]); W^O ``out_proj``."""
    yield from _linear(f"{logical}.q", f"{attnkit}.q_proj", bias)
    for i, part in enumerate(("k", "v")):
        rows = slice(i * d, (i + 1) * d)
        yield f"{logical}.{part}.weight", f"{attnkit}.kv_proj.weight", rows
        if bias:
            yield f"{logical}.{part}.bias", f"{attnkit}.kv_proj.bias", rows
    yield from _linear(f"{logical}.out", f"{attnkit}.out_proj", bias)


def _linear(logical: str, attnkit: str, bias: bool) -> Iterator[tuple[str, str, slice | None]]:
    yield f"{logical}.weight", f"{attnkit}.weight", None
    if bias:
        yield f"{logical}.bias", f"{attnkit}.bias", None


def _norm(logical: str, attnkit: str) -> Iterator[tuple[str, str, slice | None]]:
    return _linear(logical, attnkit, True)


def _relative(logical: str, attnkit: str, cfg) -> Iterator[tuple[str, str, slice | None]]:
    """Shaw et al.'s embeddings of one self-attention (shared by its heads), when it has them."""
    if cfg.positional == "relative":
        yield f"{logical}.rel_k", f"{attnkit}.positions.a_k", None
        if cfg.relative_values:
            yield f"{logical}.rel_v", f"{attnkit}.positions.a_v", None


def _self_attention_layer(logical: str, attnkit: str, cfg) -> list[tuple[str, str, slice | None]]:
    """An encoder (or LM) layer: self-attention and feed-forward, each with its residual norm."""
    d, b = cfg.d_model, cfg.bias
    return [
        *_attention(f"{logical}.self_attn", f"{attnkit}.self_attn", d, b),
        *_relative(f"{logical}.self_attn", f"{attnkit}.self_attn", cfg),
        *_norm(f"{logical}.self_attn_norm", f"{attnkit}.attn_residual.norm"),
        *_linear(f"{logical}.ffn.w1", f"{attnkit}.ffn.w1", b),
        *_linear(f"{logical}.ffn.w2", f"{attnkit}.ffn.w2", b),
        *_norm(f"{logical}.ffn_norm", f"{attnkit}.ffn_residual.norm"),
    ]


def name_table(cfg: TransformerConfig) -> list[tuple[str, str, slice | None]]:
    """(logical name, attnkit state_dict name, rows of that tensor or None for all of it).

    A logical name may appear more than once (a shared or tied tensor under several attnkit names);
    reading takes the first, writing fills all.
    """
    d, b = cfg.d_model, cfg.bias
    table: list[tuple[str, str, slice | None]] = [
        ("src_embed", "src_embed.embedding.weight", None),
        ("tgt_embed", "tgt_embed.embedding.weight", None),
    ]
    if cfg.share_vocab:
        table.append(("src_embed", "tgt_embed.embedding.weight", None))
    for i in range(cfg.n_encoder_layers):
        table += _self_attention_layer(f"encoder.{i}", f"encoder.layers.{i}", cfg)
    for i in range(cfg.n_decoder_layers):
        layer = f"decoder_layers.{i}"
        table += _attention(f"decoder.{i}.self_attn", f"{layer}.self_attn", d, b)
        table += _relative(f"decoder.{i}.self_attn", f"{layer}.self_attn", cfg)
        table += _norm(f"decoder.{i}.self_attn_norm", f"{layer}.self_residual.norm")
        table += _attention(f"decoder.{i}.cross_attn", f"{layer}.cross_attn", d, b)
        table += _norm(f"decoder.{i}.cross_attn_norm", f"{layer}.cross_residual.norm")
        table += _linear(f"decoder.{i}.ffn.w1", f"{layer}.ffn.w1", b)
        table += _linear(f"decoder.{i}.ffn.w2", f"{layer}.ffn.w2", b)
        table += _norm(f"decoder.{i}.ffn_norm", f"{layer}.ffn_residual.norm")
    if cfg.norm == "pre":
        table += _norm("encoder.final_norm", "encoder.final_norm")
        table += _norm("decoder.final_norm", "decoder_norm")
    if cfg.positional == "learned":
        table.append(("src_positions", "src_embed.positions.embedding.weight", None))
        table.append(("tgt_positions", "tgt_embed.positions.embedding.weight", None))
        if cfg.share_vocab:
            table.append(("src_positions", "tgt_embed.positions.embedding.weight", None))
    # The pre-softmax projection: tied, output_proj.weight IS the target embedding (one tensor).
    table += _linear("output", "output_proj", not cfg.tie_output or cfg.output_bias)
    if cfg.tie_output:
        table.append(("tgt_embed", "output_proj.weight", None))
    return table


def lm_name_table(cfg: LMConfig) -> list[tuple[str, str, slice | None]]:
    """:func:`name_table` for the decoder-only language model."""
    table: list[tuple[str, str, slice | None]] = [("tgt_embed", "embed.embedding.weight", None)]
    for i in range(cfg.n_layers):
        table += _self_attention_layer(f"decoder.{i}", f"layers.{i}", cfg)
    if cfg.norm == "pre":
        table += _norm("decoder.final_norm", "final_norm")
    if cfg.positional == "learned":
        table.append(("tgt_positions", "embed.positions.embedding.weight", None))
    table += _linear("output", "output_proj", not cfg.tie_output)
    if cfg.tie_output:
        table.append(("tgt_embed", "output_proj.weight", None))
    return table


def logical_weights(model: Transformer | TransformerLM, *, positions: int = 0) -> dict[str, Tensor]:
    """Every weight of an attnkit Transformer or LM under its logical name (float32, CPU, detached).

    ``positions``: rows of the sinusoidal tables (at least the model's max_len): a runtime that
    decodes further than attnkit needs the same sinusoids further on.
    A model holding a weight the table does not name is refused: a converter that dropped it would
    write a model that computes something else.
    """
    cfg = model.config
    state = model.state_dict()
    table = lm_name_table(cfg) if isinstance(cfg, LMConfig) else name_table(cfg)
    unknown = sorted(set(state) - {name for _, name, _ in table})
    if unknown:
        raise ConfigError(
            f"export: this model has weights no converter maps ({', '.join(unknown[:3])}"
            f"{', ...' if len(unknown) > 3 else ''}); refusing to write a model without them"
        )
    out: dict[str, Tensor] = {}
    for logical, name, rows in table:
        if logical not in out:
            tensor = state[name] if rows is None else state[name][rows]
            out[logical] = tensor.detach().float().cpu().clone()
    if cfg.positional == "sinusoidal":
        n_rows = max(positions, cfg.max_len)
        out["src_positions"] = out["tgt_positions"] = sinusoidal_encoding(n_rows, cfg.d_model)
    return out


def attnkit_state_dict(logical: dict[str, Tensor], cfg: TransformerConfig) -> dict[str, Tensor]:
    """The inverse of :func:`logical_weights`: a state_dict that ``Transformer(cfg)`` loads strictly.

    Sinusoidal position tables are not weights in attnkit; they must equal attnkit's own table (an
    importer permutes the model's features so that they do, see ``huggingface.py``).
    """
    shapes = {k: v.shape for k, v in _shape_model(cfg).state_dict().items()}
    state: dict[str, Tensor] = {}
    for logical_name, name, rows in name_table(cfg):
        if logical_name not in logical:
            raise CheckpointError(f"the imported model lacks the weight {logical_name!r}")
        tensor = logical[logical_name].float()
        if name not in state:
            state[name] = torch.zeros(shapes[name])
        target = state[name] if rows is None else state[name][rows]
        if target.shape != tensor.shape:
            raise CheckpointError(
                f"weight {logical_name!r} has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}"
            )
        target.copy_(tensor)
    return state


def _shape_model(cfg: TransformerConfig) -> nn.Module:
    """A model of ``cfg`` on the meta device: its state_dict gives shapes without allocating."""
    from ..model import Transformer

    with torch.device("meta"):
        return Transformer(cfg)
