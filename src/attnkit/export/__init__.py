"""Models leave attnkit and come in: CTranslate2 and Hugging Face (MarianMTModel) export, Marian import.

    export_checkpoint("ckpt.pt", "ctranslate2", "out_dir", quantization="int8")  # a Translator, or a
                                                                   # Generator for model.arch lm
    export_checkpoint("ckpt.pt", "huggingface", "out_dir")
    import_checkpoint("huggingface", "marian_dir", "ckpt.pt")

Every converter goes through ``weights.py`` (attnkit parameter names <-> logical names) and each
comes with parity tests (tests/test_export_*.py). The output is written beside its destination and
moved into place only once complete, so a failed export never destroys what was there; ``force``
replaces an earlier export only, never another folder (``output.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..checkpoint import load_checkpoint, model_from_checkpoint
from ..data.tokenizer import SubwordTokenizer
from ..errors import CheckpointError, ConfigError
from ..model.config import LMConfig
from ..model.lm import TransformerLM
from ..model.transformer import Transformer
from ..plugin import task_of
from ..report import Progress
from .output import MARKER, check_replaceable, write_then_swap

__all__ = ["MARKER", "export_checkpoint", "import_checkpoint", "load_for_export"]
FORMATS = ("ctranslate2", "huggingface")
IMPORT_FORMATS = ("huggingface",)


def load_for_export(path: str | Path):
    """(model in eval mode, tokenizer) of a Transformer or LM checkpoint; another arch is a clear error."""
    state = load_checkpoint(path)
    model = model_from_checkpoint(state).eval()
    if not isinstance(model, Transformer | TransformerLM):  # the converters write these layers
        raise CheckpointError(
            f"{path}: holds {task_of(state, path).noun} with model.arch {state['arch']!r}; "
            "only Transformer translation and language model (arch lm) checkpoints can be exported"
        )
    tokenizer = SubwordTokenizer.from_state_dict(state["tokenizer"])
    cfg = model.config
    if cfg.pruned_heads:  # CTranslate2 and Marian hold n_heads heads in every layer
        raise CheckpointError(
            f"{path}: has pruned heads (layers with different numbers of heads), which no export "
            "format holds; translate it with attnkit"
        )
    ours: tuple[int, ...]
    theirs: tuple[int, ...]
    if isinstance(cfg, LMConfig):  # one vocabulary, the tokenizer's source side
        ours, theirs = (tokenizer.src_vocab_size,), (cfg.vocab_size,)
    else:
        ours = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
        theirs = (cfg.src_vocab_size, cfg.tgt_vocab_size)
    if ours != theirs:
        raise CheckpointError(f"{path}: tokenizer vocabularies {ours} do not match the model's {theirs}")
    return model, tokenizer


def export_checkpoint(
    checkpoint: str | Path,
    fmt: str,
    output: str | Path,
    *,
    quantization: str = "float32",
    force: bool = False,
    report: bool = False,
) -> Path:
    """Export ``checkpoint`` to ``output`` (a new directory) in format ``fmt``.

    ``force`` replaces an earlier export (a folder holding :data:`MARKER` and only the files it lists),
    never any other folder, and only once the new export is complete. ``report``: say each of the
    three stages (read, convert, write) on stderr as it ends, with the pace
    (:class:`~attnkit.report.Progress`): a large model's export takes minutes.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    output = Path(output)
    if output.exists() and not force:
        raise ConfigError(f"output folder {output} already exists (pass --force to replace it)")
    if fmt != "ctranslate2" and quantization != "float32":
        raise ConfigError("--quantization applies to --format ctranslate2 only")
    progress = Progress(3, "export", "stage") if report else None
    stage = progress.step if progress else lambda line: None
    model, tokenizer = load_for_export(checkpoint)
    write = _writer(fmt, model, tokenizer, quantization)
    check_replaceable(output, checkpoint)  # after the model checks: a refused model names its problem
    # said once every check passed: a refused export is its one line of error alone
    stage(f"read {checkpoint} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters)")
    try:

        def converted(tmp: Path) -> None:
            write(tmp)
            stage(f"converted to {fmt}" + (f" ({quantization})" if fmt == "ctranslate2" else ""))

        written = write_then_swap(output, converted, fmt)
        size = sum(f.stat().st_size for f in written.rglob("*") if f.is_file())
        stage(f"wrote {written} ({size / 1e6:.1f} MB)")
    finally:
        if progress:
            progress.close()
    return written


def _writer(fmt: str, model, tokenizer: SubwordTokenizer, quantization: str) -> Callable[[Path], None]:
    """What writes ``model`` in ``fmt`` into a folder, once the model is known to be exportable."""
    lm = isinstance(model, TransformerLM)
    if fmt == "ctranslate2":
        from .ctranslate2 import check_exportable, export_ctranslate2

        check_exportable(model.config)

        def write(tmp: Path) -> None:
            export_ctranslate2(model, tokenizer, str(tmp), quantization=quantization)
            write_sentencepiece(tokenizer, tmp, lm=lm)

        return write
    if lm:
        raise ConfigError(
            "Hugging Face export writes MarianMTModel (encoder-decoder) only; export a language model "
            "(model.arch lm) with --format ctranslate2 (a ctranslate2.Generator)"
        )
    from .huggingface import check_exportable as check_hf
    from .huggingface import export_marian

    check_hf(model.config)
    return lambda tmp: export_marian(model, tokenizer, tmp)


def import_checkpoint(fmt: str, source: str | Path, output: str | Path, *, force: bool = False) -> Path:
    """Turn a model directory of format ``fmt`` (or a Hugging Face Hub id) into an attnkit checkpoint
    file ``output``."""
    if fmt not in IMPORT_FORMATS:
        raise ConfigError(f"unknown import format {fmt!r} (choose from {', '.join(IMPORT_FORMATS)})")
    from ..checkpoint import check_checkpoint_output, save_checkpoint

    output = check_checkpoint_output(output, force=force, make_folders=True)
    from .hub import model_folder
    from .marian_import import import_marian

    return save_checkpoint(
        import_marian(model_folder(source)), output
    )  # atomic: the old file stays until it is written


def write_sentencepiece(tokenizer: SubwordTokenizer, folder: Path, *, lm: bool = False) -> None:
    """The SentencePiece model(s) beside an exported model: joint or a language model's ->
    sentencepiece.model, else source.model and target.model."""
    state = tokenizer.state_dict()
    if tokenizer.joint or lm:
        (folder / "sentencepiece.model").write_bytes(state["src"])
    else:
        (folder / "source.model").write_bytes(state["src"])
        (folder / "target.model").write_bytes(state["tgt"])
