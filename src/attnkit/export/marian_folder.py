"""Read a Hugging Face MarianMTModel folder and check it whole, before anything is converted.

``from_pretrained`` fills a tensor the file lacks with random values and says so in a log line; an
importer built on it turns a truncated or mismatched folder into a model that translates garbage.
Here nothing is filled in: every parameter of the model that ``config.json`` describes must be in
``model.safetensors`` (or be tied to one that is) with its shape and finite values, nothing else may
be there, and the vocabulary must have one entry per embedding row. Each problem is one
:class:`CheckpointError` naming the file and the tensor or field. Pickled weights
(``pytorch_model.bin``) are refused: unpickling runs code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..errors import CheckpointError
from .huggingface import transformers_module

WEIGHTS = "model.safetensors"
POSITIONS = "embed_positions"  # Marian's sinusoidal tables: computed, never needed from the file

_POSITIVE_INTS = (
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "max_position_embeddings",
    "vocab_size",
)
_IDS = ("pad_token_id", "eos_token_id", "decoder_start_token_id", "decoder_vocab_size")  # int or null
_BOOLS = ("scale_embedding", "share_encoder_decoder_embeddings", "tie_word_embeddings")
_RATES = ("dropout", "attention_dropout")


def read_json(path: Path, what: str = "a JSON object") -> Any:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent}: not a MarianMTModel folder ({path.name} is missing)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e.strerror})") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected {what}, found a JSON {type(value).__name__}")
    return value


def marian_config(folder: Path):
    """config.json as a ``MarianConfig``, each field it sets checked for its type."""
    config = read_json(folder / "config.json")
    if config.get("model_type") != "marian":
        raise CheckpointError(
            f"{folder}: config.json says model_type {config.get('model_type')!r}, not 'marian'"
        )

    def bad(key: str, expected: str):
        return CheckpointError(
            f"{folder / 'config.json'}: {key} must be {expected}, got {json.dumps(config[key])}"
        )

    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    for key in _POSITIVE_INTS:
        if key in config and not (is_int(config[key]) and config[key] > 0):
            raise bad(key, "a positive integer")
    for key in _IDS:
        if config.get(key) is not None and not (is_int(config[key]) and config[key] >= 0):
            raise bad(key, "a non-negative integer or null")
    for key in _BOOLS:
        if key in config and not isinstance(config[key], bool):
            raise bad(key, "true or false")
    for key in _RATES:
        v = config.get(key, 0.0)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1):
            raise bad(key, "a number in [0, 1)")
    if "activation_function" in config and not isinstance(config["activation_function"], str):
        raise bad("activation_function", "a string")
    tf = transformers_module()
    verbosity = tf.logging.get_verbosity()
    tf.logging.set_verbosity_error()  # its warnings (an id outside the vocabulary) would be a second line
    try:
        hf_config = tf.MarianConfig.from_dict(config)
    except (TypeError, ValueError, KeyError) as e:
        raise CheckpointError(f"{folder / 'config.json'}: not a Marian configuration ({e})") from None
    finally:
        tf.logging.set_verbosity(verbosity)
    rows = min(hf_config.vocab_size, hf_config.decoder_vocab_size or hf_config.vocab_size)
    for key in ("pad_token_id", "eos_token_id", "decoder_start_token_id"):
        if config.get(key) is not None and config[key] >= rows:
            role = key.removesuffix("_token_id").replace("decoder_start", "decoder start")
            raise CheckpointError(
                f"{folder / 'config.json'}: the {role} id {config[key]} is not a row of the "
                f"embeddings ({rows})"
            )
    for side in ("encoder", "decoder"):
        heads = getattr(hf_config, f"{side}_attention_heads")
        if hf_config.d_model % heads:
            raise CheckpointError(
                f"{folder / 'config.json'}: d_model {hf_config.d_model} is not a multiple of "
                f"{side}_attention_heads {heads}"
            )
    return hf_config


def _read_weights(folder: Path) -> dict[str, Tensor]:
    path = folder / WEIGHTS
    if not path.is_file():
        if (folder / "pytorch_model.bin").exists():
            raise CheckpointError(
                f"{folder}: the weights are pytorch_model.bin, a pickle (loading one can run code); "
                f"attnkit reads {WEIGHTS} only: convert it with transformers' save_pretrained"
            )
        raise CheckpointError(f"{folder}: not a MarianMTModel folder ({WEIGHTS} is missing)")
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        message = " ".join(str(e).split())[:200]
        raise CheckpointError(f"{path}: not a readable safetensors file ({message})") from None


def marian_weights(folder: Path, hf_config) -> dict[str, Tensor]:
    """Every tensor of the MarianMTModel that ``hf_config`` describes, read from model.safetensors and
    checked: none missing (a tied tensor may be stored under any of its names), none unexpected, each
    with its shape and finite. Tied names all map to the stored tensor."""
    transformers = transformers_module()
    try:
        with torch.device("meta"):  # names, shapes and ties without allocating
            shape_model = transformers.MarianMTModel(hf_config)
    except (AssertionError, ValueError, TypeError, RuntimeError) as e:
        message = " ".join(str(e).split())[:200]
        raise CheckpointError(
            f"{folder / 'config.json'}: no Marian model can be built from it ({message})"
        ) from None
    expected = {name: tuple(t.shape) for name, t in shape_model.state_dict().items()}
    ties: dict[int, list[str]] = {}
    for name, p in shape_model.named_parameters(remove_duplicate=False):
        ties.setdefault(id(p), []).append(name)
    groups = list(ties.values()) + [[name] for name, _ in shape_model.named_buffers()]

    stored = _read_weights(folder)
    where = folder / WEIGHTS
    unexpected = sorted(set(stored) - set(expected))
    if unexpected:
        raise CheckpointError(
            f"{where}: unexpected tensor {unexpected[0]!r} ({len(unexpected)} the model of config.json "
            f"does not have: {hf_config.encoder_layers}+{hf_config.decoder_layers} layers, d_model "
            f"{hf_config.d_model})"
        )
    for name, tensor in stored.items():
        if tuple(tensor.shape) != expected[name]:
            raise CheckpointError(
                f"{where}: tensor {name!r} has shape {tuple(tensor.shape)}, config.json gives "
                f"{expected[name]}"
            )
        if (tensor.is_floating_point() or tensor.is_complex()) and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{where}: tensor {name!r} holds NaN or infinite values")
    state: dict[str, Tensor] = {}
    missing = []
    for names in groups:
        present = [n for n in names if n in stored]
        if present:
            state.update(dict.fromkeys(names, stored[present[0]]))
        elif not all(POSITIONS in n for n in names):
            missing.append(names[0])
    if missing:
        raise CheckpointError(
            f"{where}: the tensor {missing[0]!r} is missing ({len(missing)} of the model config.json "
            f"describes: {hf_config.encoder_layers}+{hf_config.decoder_layers} layers); refusing to "
            "fill it with random values"
        )
    return state


def read_vocab(folder: Path, name: str, rows: int) -> dict[str, int]:
    """vocab.json (or target_vocab.json): piece -> row, one entry for each of the ``rows`` rows."""
    path = folder / name
    vocab = read_json(path, "a JSON object of piece: id")
    ids = list(vocab.values())
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        bad = next(p for p, i in vocab.items() if not isinstance(i, int) or isinstance(i, bool))
        raise CheckpointError(f"{path}: the id of {bad!r} is {json.dumps(vocab[bad])}, not an integer")
    if len(vocab) != rows or set(ids) != set(range(rows)):
        raise CheckpointError(
            f"{path}: {len(vocab)} entries with ids {min(ids, default=0)}..{max(ids, default=-1)}, but the "
            f"weights have {rows} embedding rows (ids 0..{rows - 1}, one piece each): it belongs to "
            "another model"
        )
    return vocab


def check_pieces_in_vocab(path: Path, pieces: list[str], vocab: dict[str, int], vocab_name: str) -> None:
    """Refuse a SentencePiece model whose pieces are (mostly) not in the vocabulary: another model's.

    Marian's vocabulary is built from its SentencePiece models, so nearly all pieces are in it; a few
    may be absent (never seen in the training data) and encode as unknown, as in Marian.
    """
    absent = [p for p in pieces if p not in vocab]
    if len(absent) > MAX_ABSENT_SHARE * max(len(pieces), 1):
        raise CheckpointError(
            f"{path}: {len(absent)} of its {len(pieces)} pieces are not in {vocab_name} (e.g. "
            f"{absent[0]!r}): the SentencePiece model does not belong to these weights"
        )


MAX_ABSENT_SHARE = 0.05
