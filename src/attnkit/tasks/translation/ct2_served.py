"""A translation checkpoint served with CTranslate2 decoding (``attnkit serve --engine ctranslate2``).

``/v1/translate`` decodes with CTranslate2 (:mod:`attnkit.tasks.translation.ct2_engine`: the export
cached beside the checkpoint, its own batching of each call); ``/v1/attention`` and the page still
use the torch model, which every decoding process loads too. Options CTranslate2 cannot honour answer
422 in one line (a length penalty with beam > 1, say).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...checkpoint import model_from_checkpoint
from ...data.tokenizer import SubwordTokenizer
from ...decoding.options import SearchOptions
from ...errors import ConfigError
from .ct2_cache import exported_model
from .ct2_engine import CT2Translator
from .engine_choice import auto_engine, differs
from .served import TranslationModel
from .translator import TranslationEngine, Translator


class CT2Served(TranslationModel):
    """A :class:`TranslationModel` whose ``translate`` is CTranslate2's; ``ct2`` is None where the
    model only checks requests (the server's process when decoding runs in processes of its own).
    ``fallback`` (``--engine auto``): a search where CTranslate2 would find other tokens, or that it
    refuses, decodes with torch (:func:`.engine_choice.differs`) instead of answering 422."""

    engine_class = CT2Translator  # its declaration answers even where the engine is not loaded

    def __init__(
        self,
        name: str,
        arch: str,
        translator: Translator,
        experiment: dict[str, Any] | None,
        folder: Path,
        *,
        threads: int | None = None,
        load_engine: bool = True,
        fallback: bool = False,
    ):
        super().__init__(name, arch, translator, experiment)
        self.folder, self.fallback = folder, fallback
        self.ct2 = CT2Translator(translator, folder, threads=threads) if load_engine else None

    def _on_torch(self, options: SearchOptions | None) -> bool:
        return self.fallback and options is not None and differs(options) is not None

    def check_search(self, options: SearchOptions) -> None:
        """As the engine that decodes ``options`` declares (:meth:`engine`)."""
        if why := (Translator if self._on_torch(options) else CT2Translator).refuses(options):
            raise ConfigError(why)

    @classmethod
    def from_state(
        cls,
        name: str,
        path: Path,
        blob: bytes,
        state: dict[str, Any],
        device: str,
        *,
        threads: int | None = None,
        load_engine: bool = True,
    ) -> CT2Served:
        """Export ``blob`` (the checkpoint's bytes) unless cached, then load both engines."""
        folder = exported_model(path, blob)
        tokenizer = SubwordTokenizer.from_state_dict(state["tokenizer"])
        translator = Translator(model_from_checkpoint(state), tokenizer, device)
        return cls(
            name,
            state["arch"],
            translator,
            state.get("experiment"),
            folder,
            threads=threads,
            load_engine=load_engine,
        )

    def engine(self, options: SearchOptions | None = None) -> TranslationEngine:
        if self._on_torch(options):
            return self.translator
        if self.ct2 is None:
            raise RuntimeError(f"{self.name}: CTranslate2 is not loaded in this process")
        return self.ct2

    def streams(self, options: SearchOptions, *, prefix: str | tuple[str, ...] | None = None) -> bool:
        # CTranslate2 batches each call itself; what falls back to torch streams as torch's does
        return self._on_torch(options) and super().streams(options, prefix=prefix)

    def release(self) -> None:
        super().release()
        self.ct2 = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "engine": "auto: ctranslate2" if self.fallback else "ctranslate2"}


def load_served(
    name: str,
    state: dict[str, Any],
    device: str,
    *,
    engine: str = "torch",
    threads: int | None = None,
    load_engine: bool = True,
    compile: bool = False,
    path: Path | None = None,
    blob: bytes | None = None,
    announce: Any = None,
) -> TranslationModel:
    """Translation's served model (``TaskInfo.serve``): torch (``compile``: through the compiled step,
    a GPU's), or with ``engine="ctranslate2"`` CTranslate2's (exported now unless cached, ``threads``
    CPU threads; ``load_engine=False``: exported, not loaded); ``"auto"``: CTranslate2 where it
    finds the same tokens (:mod:`.engine_choice`), what it refuses decoded by torch, else torch."""
    if engine == "ctranslate2":
        assert path is not None and blob is not None, "CTranslate2 exports the checkpoint's file"
        return CT2Served.from_state(name, path, blob, state, device, threads=threads, load_engine=load_engine)
    served = TranslationModel.load(name, state, device)
    if engine == "auto":
        chosen, why = auto_engine(served.translator.model, served.translator.device, compile=compile)
        if announce is not None:
            announce(f"engine auto: {chosen} ({why})")
        if chosen == "ctranslate2":
            assert path is not None and blob is not None, "CTranslate2 exports the checkpoint's file"
            folder, translator = exported_model(path, blob), served.translator
            return CT2Served(
                name, state["arch"], translator, state.get("experiment"), folder,
                threads=threads, load_engine=load_engine, fallback=True,
            )  # fmt: skip
    if compile:
        served.compile(announce=announce, check_only=not load_engine)
    return served
