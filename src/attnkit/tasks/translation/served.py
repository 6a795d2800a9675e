"""A translation checkpoint as the server serves it (``POST /v1/translate`` and ``/v1/attention``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ...checkpoint import model_from_checkpoint
from ...data.tokenizer import SubwordTokenizer
from ...decoding.options import SearchOptions
from ...errors import ConfigError
from ...fast import packed_linears
from ...plugin.served import parameter_count
from .stream import TranslationStream
from .translator import Translation, TranslationEngine, Translator


class TranslationModel:
    """A :class:`Translator` plus the facts the API reports and checks."""

    task = "translate"

    engine_class: type[TranslationEngine] = Translator  # whose declaration check_search asks

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

    def compile(self, announce: Callable[[str], None] | None = None, *, check_only: bool = False) -> None:
        """Translate through the compiled step (:meth:`Translator.compile`) from now on, every
        request as part of a whole batch (joining a running search needs growing caches)."""
        if not check_only:
            self._packing.close()  # the step is compiled from the readable modules, not packed ones
        try:
            self.translator.compile(announce=announce, check_only=check_only)
        except ConfigError as e:
            raise ConfigError(f"--compile: model {self.name!r}: {e}") from None

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str) -> TranslationModel:
        model = model_from_checkpoint(state)
        tokenizer = SubwordTokenizer.from_state_dict(state["tokenizer"])
        return cls(name, state["arch"], Translator(model, tokenizer, device), state.get("experiment"))

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the server's decoding runs for ``op``: a batched function, or a stream factory."""
        if op == "translate":
            options, prefix = o["options"], o.get("prefix")
            if self.streams(options, prefix=prefix):
                return None, lambda: self.stream(options, prefix=prefix)
            return lambda items: self.translate(
                items, options, prefix=prefix, batch_tokens=max_batch_tokens
            ), None
        if op == "attention":
            from .attention_payload import attention_payload

            beam, flow = o["beam"], bool(o.get("flow"))
            return lambda items: [
                attention_payload(self.translator, t, beam=beam, flow=flow) for t in items
            ], None
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    @property
    def max_src_tokens(self) -> int:
        return self.translator.max_src_len

    def count_tokens(self, text: str) -> int:
        return len(self.translator.tokenizer.encode(text, side="src"))

    def engine(self, options: SearchOptions | None = None) -> TranslationEngine:
        """What decodes this model's translations with ``options`` (the torch translator;
        CTranslate2 in a subclass)."""
        return self.translator

    def translate(
        self,
        sentences: list[str],
        options: SearchOptions,
        *,
        prefix: str | tuple[str, ...] | None = None,
        batch_tokens: int,
    ) -> list[Translation]:
        """``prefix``: one str for every sentence, or one per sentence."""
        return self.engine(options).translate(
            sentences,
            options,
            prefix=list(prefix) if isinstance(prefix, tuple) else prefix,
            batch_tokens=batch_tokens,
        )

    def check_search(self, options: SearchOptions) -> None:
        """What this model's engine cannot decode is a ConfigError (the server answers 422), as the
        engine declares it (:class:`~.translator.TranslationEngine`)."""
        if why := self.engine_class.refuses(options):
            raise ConfigError(why)

    def streams(self, options: SearchOptions, *, prefix: str | tuple[str, ...] | None = None) -> bool:
        """Whether requests with these options decode by continuous batching (:meth:`stream`); the
        RNN, relative or rotary positions, greedy search, sampling and a prefix per sentence run as
        whole batches instead, as does a compiled translator."""
        if self.translator.layout is not None or isinstance(prefix, tuple) or options.sample:
            return False
        return TranslationStream.supports(self.translator, options.beam)

    def stream(self, options: SearchOptions, *, prefix: str | None = None) -> TranslationStream:
        """A running beam search; ``prefix`` starts every sentence of it."""
        return TranslationStream.start(self.translator, options, prefix=prefix)

    def release(self) -> None:
        """Free the weights (they decode in another process); the tokenizer and config stay."""
        self._packing.close()  # the packed copies first
        self.translator.model.to("meta")

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
            "parameters": parameter_count(self.translator.model),
            "device": str(self.translator.device),
        }
