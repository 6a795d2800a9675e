"""``--engine auto``: the fastest engine that decodes the same tokens as attnkit's own search.

CTranslate2 runs the same model about twice as fast as the torch engine on a CPU
(docs/BENCHMARKS.md), and it finds the same tokens for every search it does not refuse
(:func:`.ct2_engine.refuses`) but one: a beam search with a length penalty, which it divides by
length^alpha where attnkit divides by GNMT's ((5 + length) / 6)^alpha (:func:`differs`; 1 of 30
test sentences ranked otherwise at the default 0.6, tests/test_engine_auto.py). So ``auto`` is
CTranslate2 where it is installed, can hold the model exactly and finds the same tokens, and torch
where it cannot: an RNN, pruned heads, an ensemble, int8 weights (the two engines' int8 kernels
round differently), a compiled step, a device CTranslate2 does not run on, a beam search with a
length penalty, or a search it refuses (sampling, say). The choice and its reason go to stderr.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ...decoding.options import SearchOptions

ENGINES = ("auto", "torch", "ctranslate2")


def differs(options: SearchOptions) -> str | None:
    """Why CTranslate2 would not find the tokens torch finds for ``options`` (None: it would)."""
    from .ct2_engine import refuses

    if why := refuses(options):
        return why.removeprefix("--engine ctranslate2 ").split(" (use")[0]
    if options.beam > 1 and options.length_penalty > 0:
        return "a beam search's length penalty is CTranslate2's length^alpha, not GNMT's"
    return None


def auto_engine(
    model: Any,
    device: Any,
    options: SearchOptions | None = None,
    *,
    ensemble: bool = False,
    quantize: str | None = None,
    compile: bool = False,
) -> tuple[str, str]:
    """("ctranslate2" or "torch", why) for a translator's torch ``model`` on ``device``; ``options``:
    the one search asked (the command line), or None (a server, whose requests choose per request)."""
    from ...export.ctranslate2 import check_exportable
    from ...model.transformer import Transformer

    why_not = None
    if ensemble:
        why_not = "an ensemble decodes with torch"
    elif compile:
        why_not = "--compile runs torch's compiled step"
    elif quantize:
        why_not = "--quantize int8 rounds otherwise in CTranslate2's kernels"
    elif getattr(device, "type", str(device)) not in ("cpu", "cuda"):
        why_not = f"CTranslate2 does not run on {device}"
    elif not isinstance(model, Transformer):
        why_not = f"CTranslate2 holds Transformers, not {type(model).__name__}"
    elif model.config.pruned_heads:
        why_not = "CTranslate2 holds as many heads in every layer (this model has pruned heads)"
    elif importlib.util.find_spec("ctranslate2") is None:
        why_not = "ctranslate2 is not installed (pip install 'attnkit[export]')"
    elif options is not None:
        why_not = differs(options)
    if why_not is None:
        try:
            check_exportable(model.config)
        except Exception as e:  # noqa: BLE001 - the exporter's one line: why this model stays on torch
            why_not = str(e)
    if why_not is not None:
        return "torch", why_not
    return "ctranslate2", "CTranslate2 finds the same tokens, faster" + (
        "; a search where they differ (sampling, a beam's length penalty) decodes with torch"
        if options is None
        else ""
    )
