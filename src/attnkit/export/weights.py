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
    output.weight                              (V_tgt, D) the pre-softmax projection (tied: tgt_embed)
    output.bias                                (V_tgt,) when the model has one

``logical_weights(model)`` reads them; ``attnkit_state_dict(logical, config)`` is the inverse.
Legend: D d_model, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor, nn

from ..errors import CheckpointError, ConfigError
from ..model import Transformer, TransformerConfig
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
        layer = f"encoder.layers.{i}"
        table += _attention(f"encoder.{i}.self_attn", f"{layer}.self_attn", d, b)
        table += _norm(f"encoder.{i}.self_attn_norm", f"{layer}.attn_residual.norm")
        table += _linear(f"encoder.{i}.ffn.w1", f"{layer}.ffn.w1", b)
        table += _linear(f"encoder.{i}.ffn.w2", f"{layer}.ffn.w2", b)
        table += _norm(f"encoder.{i}.ffn_norm", f"{layer}.ffn_residual.norm")
    for i in range(cfg.n_decoder_layers):
        layer = f"decoder_layers.{i}"
        table += _attention(f"decoder.{i}.self_attn", f"{layer}.self_attn", d, b)
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


def logical_weights(model: Transformer) -> dict[str, Tensor]:
    """Every weight of an attnkit Transformer under its logical name (float32, CPU, detached).

    A model holding a weight the table does not name (relative position embeddings, say) is refused:
    a converter that dropped it would write a model that computes something else.
    """
    cfg = model.config
    state = model.state_dict()
    unknown = sorted(set(state) - {name for _, name, _ in name_table(cfg)})
    if unknown:
        raise ConfigError(
            f"export: this model has weights no converter maps ({', '.join(unknown[:3])}"
            f"{', ...' if len(unknown) > 3 else ''}); refusing to write a model without them"
        )
    out: dict[str, Tensor] = {}
    for logical, name, rows in name_table(cfg):
        if logical not in out:
            tensor = state[name] if rows is None else state[name][rows]
            out[logical] = tensor.detach().float().cpu().clone()
    if cfg.positional == "sinusoidal":
        out["src_positions"] = out["tgt_positions"] = sinusoidal_encoding(cfg.max_len, cfg.d_model)
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
