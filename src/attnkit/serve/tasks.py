"""What the server serves: one object per loaded checkpoint, chosen by the checkpoint's task.

A checkpoint's ``arch`` decides its task ("transformer" and "rnn" translate, "lm" generates,
"classifier" classifies), and the task decides which endpoints answer for it: ``ENDPOINT_TASK``.
A task is one class with the ``ServedModel`` shape and one entry in ``LOADERS``; an endpoint asked
of a model of another task answers 422 naming what it needs and what is loaded.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..checkpoint import load_checkpoint, model_from_checkpoint
from ..classify import Classifier
from ..data.tokenizer import SubwordTokenizer
from ..errors import CheckpointError, ConfigError
from ..fast import packed_linears
from ..generate import Generation, LanguageModel
from ..translate import Translation, TranslationStream, Translator

TASK_OF_ARCH = {"transformer": "translate", "rnn": "translate", "lm": "generate", "classifier": "classify"}
ENDPOINT_TASK = {
    "translate": "translate",
    "attention": "translate",
    "generate": "generate",
    "classify": "classify",
}
TASK_NOUN = {"translate": "a translation model", "generate": "a language model", "classify": "a classifier"}


@runtime_checkable
class ServedModel(Protocol):
    """A loaded checkpoint as the server sees it."""

    name: str
    task: str  # a value of TASK_OF_ARCH
    arch: str

    def describe(self) -> dict[str, Any]: ...


class TranslationModel:
    """A translation checkpoint: a :class:`Translator` plus the facts the API reports and checks."""

    task = "translate"

    def __init__(
        self, name: str, arch: str, translator: Translator, experiment: dict[str, Any] | None = None
    ):
        self.name, self.arch, self.translator = name, arch, translator
        # A served model's weights never change: pack them once for the server's life instead of
        # at every call (Translator.translate's own packing then keeps these).
        self._packing = contextlib.ExitStack()
        self._packing.enter_context(packed_linears(translator.model))
        data = (experiment or {}).get("data", {})
        self.src_lang, self.tgt_lang = data.get("src_lang"), data.get("tgt_lang")

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str) -> TranslationModel:
        model = model_from_checkpoint(state)
        tokenizer = SubwordTokenizer.from_state_dict(state["tokenizer"])
        return cls(name, state["arch"], Translator(model, tokenizer, device), state.get("experiment"))

    @property
    def max_src_tokens(self) -> int:
        return self.translator.max_src_len

    def count_tokens(self, text: str) -> int:
        return len(self.translator.tokenizer.encode(text, side="src"))

    def translate(
        self, sentences: list[str], *, beam: int, nbest: int, length_penalty: float, batch_tokens: int
    ) -> list[Translation]:
        return self.translator.translate(
            sentences,
            beam=max(beam, nbest),
            nbest=nbest,
            length_penalty=length_penalty,
            batch_tokens=batch_tokens,
        )

    def streams(self, *, beam: int, nbest: int) -> bool:
        """Whether requests with these options decode by continuous batching (:meth:`stream`); the
        RNN, relative or rotary positions and greedy search run as whole batches instead."""
        return TranslationStream.supports(self.translator, max(beam, nbest))

    def stream(self, *, beam: int, nbest: int, length_penalty: float) -> TranslationStream:
        return self.translator.stream(beam=max(beam, nbest), nbest=nbest, length_penalty=length_penalty)

    def describe(self) -> dict[str, Any]:
        cfg = self.translator.model.config
        layers = getattr(cfg, "n_encoder_layers", None), getattr(cfg, "n_decoder_layers", None)
        return {
            "name": self.name,
            "task": self.task,
            "arch": self.arch,
            "src_lang": self.src_lang,
            "tgt_lang": self.tgt_lang,
            "max_src_tokens": self.max_src_tokens,
            "encoder_layers": layers[0],
            "decoder_layers": layers[1],
            "heads": getattr(cfg, "n_heads", 1),
            "parameters": _parameters(self.translator.model),
            "device": str(self.translator.device),
        }


class LanguageModelServed:
    """A language-model checkpoint: continues prompts (``POST /v1/generate``)."""

    task = "generate"

    def __init__(self, name: str, arch: str, lm: LanguageModel):
        self.name, self.arch, self.lm = name, arch, lm

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str) -> LanguageModelServed:
        return cls(name, state["arch"], LanguageModel.from_state(state, device=device, path=name))

    @property
    def max_src_tokens(self) -> int:
        return self.lm.model.config.max_len - 1  # bos takes one position

    def count_tokens(self, text: str) -> int:
        return len(self.lm.tokenizer.encode(text, side="src"))

    def generate(self, prompts: list[str], **options: Any) -> list[list[Generation]]:
        return self.lm.generate(prompts, **options)

    def describe(self) -> dict[str, Any]:
        cfg = self.lm.model.config
        return {
            "name": self.name,
            "task": self.task,
            "arch": self.arch,
            "max_src_tokens": self.max_src_tokens,
            "layers": cfg.n_layers,
            "heads": cfg.n_heads,
            "parameters": _parameters(self.lm.model),
            "device": str(self.lm.device),
        }


class ClassifierServed:
    """A classifier checkpoint: labels sentences (``POST /v1/classify``); longer texts are read up to
    the model's length, as ``attnkit classify`` reads them."""

    task = "classify"

    def __init__(self, name: str, arch: str, classifier: Classifier):
        self.name, self.arch, self.classifier = name, arch, classifier

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str) -> ClassifierServed:
        return cls(name, state["arch"], Classifier.from_state(state, device=device, path=name))

    def count_tokens(self, text: str) -> int:
        return min(
            len(self.classifier.tokenizer.encode(text, side="src")), self.classifier.model.config.max_len
        )

    def predict(self, texts: list[str], *, top_k: int) -> list[list[tuple[str, float]]]:
        return self.classifier.predict(texts, top_k=top_k)

    def describe(self) -> dict[str, Any]:
        cfg = self.classifier.model.config
        return {
            "name": self.name,
            "task": self.task,
            "arch": self.arch,
            "labels": self.classifier.labels,
            "pooling": cfg.pooling,
            "max_src_tokens": cfg.max_len,
            "layers": cfg.n_layers,
            "heads": cfg.n_heads,
            "parameters": _parameters(self.classifier.model),
            "device": str(self.classifier.device),
        }


def _parameters(model) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())  # tied weights once


# task -> loader(name, checkpoint state, device)
LOADERS = {
    "translate": TranslationModel.load,
    "generate": LanguageModelServed.load,
    "classify": ClassifierServed.load,
}


def model_name(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH``; a bare path is named after its file, or its folder for checkpoint_*.pt."""
    name, sep, path = spec.partition("=")
    if sep and name and "/" not in name:
        return name, Path(path)
    p = Path(spec)
    return (p.parent.name or p.stem) if p.stem.startswith("checkpoint") else p.stem, p


def load_models(specs: list[str], *, device: str = "auto") -> list[ServedModel]:
    """Load every ``--checkpoint`` spec; names must be unique, tasks servable."""
    models: list[ServedModel] = []
    for spec in specs:
        name, path = model_name(spec)
        if any(m.name == name for m in models):
            raise ConfigError(f"two checkpoints are named {name!r}: name them with NAME=PATH")
        state = load_checkpoint(path)
        task = TASK_OF_ARCH.get(state["arch"])
        if task is None:
            raise CheckpointError(f"{path}: unknown model arch {state['arch']!r}")
        if task not in LOADERS:
            raise CheckpointError(
                f"{path}: attnkit serve cannot serve {state['arch']!r} checkpoints yet (task {task!r}); "
                f"it serves: {', '.join(sorted(LOADERS))}"
            )
        models.append(LOADERS[task](name, state, device))
    if not models:
        raise ConfigError("no checkpoint to serve: give --checkpoint PATH")
    return models


def release_weights(models: list[ServedModel]) -> None:
    """Free the weights of models that decode in another process; their tokenizers, configs and
    labels stay (what the server checks requests against)."""
    for m in models:
        if isinstance(m, TranslationModel):
            m._packing.close()  # the packed copies first
            module = m.translator.model
        else:
            module = m.lm.model if isinstance(m, LanguageModelServed) else m.classifier.model
        module.to("meta")
