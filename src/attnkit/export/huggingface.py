"""Export to Hugging Face: a ``MarianMTModel`` folder (config, safetensors, MarianTokenizer files).

Marian and attnkit compute the same post-norm Transformer, with three differences handled here:

- Positions: attnkit interleaves the sinusoids (feature 2i = sin, 2i+1 = cos); Marian puts all
  sines first, then all cosines, and builds its own table. Permuting the model's D features
  (embedding columns, LayerNorm parameters, the input columns of every projection reading the
  residual stream and the output rows of every projection writing it) maps one onto the other
  exactly: nothing else in the model cares about the order of the features.
- Decoding starts from ``decoder_start_token_id``, set to attnkit's bos id (1); pad (0) and bos are
  suppressed in generation as attnkit never generates them; eos is 2.
- MarianTokenizer appends ``</s>`` to every source; attnkit's models never saw one there, so the
  exported model is told apart (``config.attnkit.source_eos = false``); with a joint vocabulary the
  folder also gets a fast tokenizer that adds nothing (:mod:`.hf_tokenizer`), which ``AutoTokenizer``
  loads, else ``tokenizer_config.json`` says to call MarianTokenizer with ``add_special_tokens=False``.

Every field of ``TransformerConfig`` is either converted exactly (covered by tests/test_export_hf.py)
or refused by ``check_exportable``:

    activation relu / gelu (erf) / swish, bias (false: zero biases), share_vocab, tie_output,
    output_bias (final_logits_bias), max_len, pad/bos/eos ids             converted
    norm pre, positional learned / relative / rotary                       refused
    dropout, attention_dropout                                             training only

Legend: D d_model, V vocabulary.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor

from ..errors import ConfigError
from ..model import TransformerConfig
from .hf_tokenizer import convertible, write_fast_tokenizer
from .weights import logical_weights

HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish"}  # attnkit name -> Marian name


def transformers_module():
    try:
        import transformers
    except ImportError:
        raise ConfigError(
            "--format huggingface needs the transformers package: pip install 'attnkit[export]'"
        ) from None
    return transformers


def marian_feature_order(d_model: int) -> Tensor:
    """Index (D,) such that ``marian[..., m] = attnkit[..., order[m]]``: the even (sine) features,
    then the odd (cosine) ones."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def residual_axis(logical: str) -> int | None:
    """The axis of a logical weight that indexes the D features of the residual stream, if any."""
    if logical in ("src_embed", "tgt_embed", "output.weight"):
        return 1
    if logical == "output.bias":
        return None
    kind = logical.rsplit(".", 1)  # (module path, "weight" | "bias")
    module = kind[0].rsplit(".", 1)[-1]
    if module.endswith("_norm"):
        return 0  # LayerNorm gain and bias
    if module in ("q", "k", "v", "w1"):
        return 1 if kind[1] == "weight" else None  # read the stream: input columns
    if module in ("out", "w2"):
        return 0  # write the stream: output rows (and their bias)
    raise KeyError(logical)


def hf_name_table(n_encoder_layers: int, n_decoder_layers: int) -> list[tuple[str, str]]:
    """(logical name, MarianMTModel state_dict name); the embeddings and output are handled apart."""
    table = []

    def attention(logical: str, hf: str) -> None:
        for part in ("q", "k", "v", "out"):
            for p in ("weight", "bias"):
                table.append((f"{logical}.{part}.{p}", f"{hf}.{part}_proj.{p}"))

    def linear(logical: str, hf: str) -> None:
        table.extend((f"{logical}.{p}", f"{hf}.{p}") for p in ("weight", "bias"))

    for i in range(n_encoder_layers):
        hf = f"model.encoder.layers.{i}"
        attention(f"encoder.{i}.self_attn", f"{hf}.self_attn")
        linear(f"encoder.{i}.self_attn_norm", f"{hf}.self_attn_layer_norm")
        linear(f"encoder.{i}.ffn.w1", f"{hf}.fc1")
        linear(f"encoder.{i}.ffn.w2", f"{hf}.fc2")
        linear(f"encoder.{i}.ffn_norm", f"{hf}.final_layer_norm")
    for i in range(n_decoder_layers):
        hf = f"model.decoder.layers.{i}"
        attention(f"decoder.{i}.self_attn", f"{hf}.self_attn")
        linear(f"decoder.{i}.self_attn_norm", f"{hf}.self_attn_layer_norm")
        attention(f"decoder.{i}.cross_attn", f"{hf}.encoder_attn")
        linear(f"decoder.{i}.cross_attn_norm", f"{hf}.encoder_attn_layer_norm")
        linear(f"decoder.{i}.ffn.w1", f"{hf}.fc1")
        linear(f"decoder.{i}.ffn.w2", f"{hf}.fc2")
        linear(f"decoder.{i}.ffn_norm", f"{hf}.final_layer_norm")
    table.append(("src_embed", "model.encoder.embed_tokens.weight"))
    table.append(("tgt_embed", "model.decoder.embed_tokens.weight"))
    table.append(("output.weight", "lm_head.weight"))
    return table


def check_exportable(cfg: TransformerConfig) -> None:
    if cfg.norm != "post":
        raise ConfigError(
            "Hugging Face export: MarianMTModel is post-norm only; this checkpoint is pre-norm "
            "(export it with --format ctranslate2 instead)"
        )
    if cfg.positional != "sinusoidal":
        raise ConfigError(
            f"Hugging Face export: MarianMTModel has fixed sinusoidal positions only; this model's "
            f"model.positional is {cfg.positional!r}"
        )
    if cfg.activation not in HF_ACTIVATIONS:
        raise ConfigError(f"Hugging Face export: activation {cfg.activation!r} has no Marian equivalent")
    if cfg.n_heads <= 0 or cfg.d_model % 2:
        raise ConfigError("Hugging Face export needs an even d_model")


def marian_config(cfg: TransformerConfig, *, source_eos: bool = False):
    """``source_eos``: the tokenizer ends sources with eos (models imported from Marian do)."""
    transformers = transformers_module()
    return transformers.MarianConfig(
        vocab_size=cfg.src_vocab_size,
        decoder_vocab_size=cfg.tgt_vocab_size,
        share_encoder_decoder_embeddings=cfg.share_vocab,
        tie_word_embeddings=cfg.tie_output,
        d_model=cfg.d_model,
        encoder_layers=cfg.n_encoder_layers,
        decoder_layers=cfg.n_decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function=HF_ACTIVATIONS[cfg.activation],
        max_position_embeddings=cfg.max_len,
        scale_embedding=True,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=0.0,
        pad_token_id=cfg.pad_id,
        bos_token_id=cfg.bos_id,
        eos_token_id=cfg.eos_id,
        decoder_start_token_id=cfg.bos_id,
        forced_eos_token_id=cfg.eos_id,
        attnkit={"source_eos": bool(source_eos), "format": 1},
    )


def marian_state_dict(model) -> dict[str, Tensor]:
    """attnkit weights -> MarianMTModel weights (features reordered to Marian's sine/cosine layout)."""
    cfg: TransformerConfig = model.config
    w = logical_weights(model)
    order = marian_feature_order(cfg.d_model)
    state: dict[str, Tensor] = {}
    for logical, hf in hf_name_table(cfg.n_encoder_layers, cfg.n_decoder_layers):
        if logical not in w:  # no biases in attnkit (bias=False): Marian's are zero
            state[hf] = torch.zeros(w[logical.replace(".bias", ".weight")].shape[0])
            continue
        axis = residual_axis(logical)
        state[hf] = w[logical] if axis is None else w[logical].index_select(axis, order)
    if cfg.share_vocab:
        state["model.shared.weight"] = state["model.encoder.embed_tokens.weight"]
    bias = w.get("output.bias", torch.zeros(cfg.tgt_vocab_size))
    state["final_logits_bias"] = bias[None, :].clone()  # (1, V)
    return state


def export_marian(model, tokenizer, folder: Path) -> None:
    """Write a MarianMTModel + MarianTokenizer folder that ``from_pretrained`` loads offline."""
    cfg: TransformerConfig = model.config
    check_exportable(cfg)
    transformers = transformers_module()
    hf = transformers.MarianMTModel(marian_config(cfg, source_eos=tokenizer.src_eos)).eval()
    state = marian_state_dict(model)
    missing, unexpected = hf.load_state_dict(state, strict=False)
    missing = [k for k in missing if "embed_positions" not in k and k not in state]
    if missing or unexpected:
        raise RuntimeError(f"Marian weight mapping is incomplete: missing {missing}, unexpected {unexpected}")
    hf.generation_config.max_length = cfg.max_len  # positions the decoder can embed (bos included)
    hf.generation_config.suppress_tokens = [cfg.pad_id, cfg.bos_id]  # attnkit never generates them
    hf.generation_config.num_beams = 1
    folder.mkdir(parents=True)
    with _quiet(transformers), _os_errors(folder / "model.safetensors"):
        hf.save_pretrained(folder, safe_serialization=True)
    _write_tokenizer(tokenizer, folder)


@contextlib.contextmanager
def _quiet(transformers) -> Iterator[None]:
    """No progress bar on stderr while saving: a command's stderr is its one error line."""
    logging = transformers.utils.logging
    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging.enable_progress_bar()


@contextlib.contextmanager
def _os_errors(path: Path) -> Iterator[None]:
    """safetensors reports a failed write (a full disk) as ``SafetensorError("... (os error 28)")``;
    turn it back into the ``OSError`` it is, so that the command prints the OS's message and the file."""
    from safetensors import SafetensorError

    try:
        yield
    except SafetensorError as e:
        found = re.search(r"os error (\d+)", str(e))
        if found is None:
            raise ConfigError(f"cannot write {path}: {' '.join(str(e).split())[:200]}") from None
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None


def _write_tokenizer(tokenizer, folder: Path) -> None:
    """source.spm, target.spm, vocab.json (+ target_vocab.json when the sides have their own models)."""
    transformers = transformers_module()
    state = tokenizer.state_dict()
    (folder / "source.spm").write_bytes(state["src"])
    (folder / "target.spm").write_bytes(state["tgt"] if state["tgt"] is not None else state["src"])

    def vocab(side: str) -> dict[str, int]:
        size = getattr(tokenizer, f"{side}_vocab_size")
        return {tokenizer.id_to_piece(i, side=side): i for i in range(size)}

    (folder / "vocab.json").write_text(json.dumps(vocab("src"), ensure_ascii=False), encoding="utf-8")
    kwargs = {}
    if not tokenizer.joint:
        (folder / "target_vocab.json").write_text(
            json.dumps(vocab("tgt"), ensure_ascii=False), encoding="utf-8"
        )
        kwargs = dict(target_vocab_file=str(folder / "target_vocab.json"), separate_vocabs=True)
    special = (tokenizer.unk_id, tokenizer.eos_id, tokenizer.pad_id, tokenizer.bos_id)
    pieces = {i: tokenizer.id_to_piece(i, side="tgt") for i in special}
    with warnings.catch_warnings():  # transformers' advice for its own users, not about this export
        warnings.filterwarnings("ignore", message=".*sacremoses.*")
        hf_tok = transformers.MarianTokenizer(
            source_spm=str(folder / "source.spm"),
            target_spm=str(folder / "target.spm"),
            vocab=str(folder / "vocab.json"),
            unk_token=pieces[tokenizer.unk_id],
            eos_token=pieces[tokenizer.eos_id],
            pad_token=pieces[tokenizer.pad_id],
            bos_token=pieces[tokenizer.bos_id],
            **kwargs,
        )
    hf_tok.save_pretrained(folder)
    if (
        tokenizer.src_eos
    ):  # an imported Marian model: MarianTokenizer's trailing </s> is what it was trained on
        return
    if tokenizer.joint and convertible(state["src"]):  # AutoTokenizer's default call gives attnkit's ids
        write_fast_tokenizer(
            state["src"], folder, {f"{k}_token": v for k, v in _special_names(pieces, tokenizer)}
        )
        return
    # Two vocabularies (MarianTokenizer is the one HF tokenizer that decodes the target side) or user
    # symbols (no exact fast tokenizer): say in the tokenizer's own config how to call it.
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["attnkit"] = {"source_eos": False, "encode_sources_with": "add_special_tokens=False"}
    config["split_special_tokens"] = True  # "<s>" in a sentence is text, as attnkit encodes it
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _special_names(pieces: dict[int, str], tokenizer) -> list[tuple[str, str]]:
    ids = {"unk": tokenizer.unk_id, "eos": tokenizer.eos_id, "pad": tokenizer.pad_id, "bos": tokenizer.bos_id}
    return [(name, pieces[i]) for name, i in ids.items()]
