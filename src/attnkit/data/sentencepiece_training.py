"""One SentencePiece model trained in memory, with attnkit's special ids (pad=0, bos=1, eos=2,
unk=3), reproducibly (a fixed thread count), and on a corpus too small for the vocabulary asked
(that size as an upper bound, with a warning)."""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from typing import Any

import sentencepiece as spm

from ..errors import ConfigError

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


def train_model(
    sentences: list[str],
    *,
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    num_threads: int,
    max_sentences: int | None,
    seed: int,
    name: str,
    user_symbols: Sequence[str] = (),
) -> bytes:
    """Train one SentencePiece model in memory and return its serialized proto.

    If the corpus is too small for ``vocab_size``, SentencePiece refuses ("Vocabulary size too
    high"); we then retrain with ``hard_vocab_limit=False`` (vocab_size becomes an upper bound) and
    warn, so tiny corpora (tests, smoke runs) work and the real size is read from the model.
    """
    options: dict[str, Any] = dict(
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        unk_id=UNK_ID,
        # Unigram EM splits work by thread, so its pieces depend on the thread count: fixing it
        # (rather than using SentencePiece's default) makes training reproducible across machines.
        num_threads=num_threads,
        minloglevel=1,
    )
    if max_sentences is not None:
        options.update(input_sentence_size=max_sentences, shuffle_input_sentence=True)
    if user_symbols:  # e.g. data.mix tags: always one piece, never split
        options.update(user_defined_symbols=list(user_symbols))
    spm.set_random_generator_seed(seed)  # only used when subsampling with max_sentences

    def run(**extra: Any) -> bytes:
        writer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=writer, **options, **extra
        )
        return writer.getvalue()

    try:
        return run()
    except RuntimeError as err:
        if "Vocabulary size too high" not in str(err):
            raise ConfigError(f"training the {name} SentencePiece model failed: {err}") from err
        detail = str(err).rsplit("]", 1)[-1].strip()
    proto = run(hard_vocab_limit=False)
    got = spm.SentencePieceProcessor(model_proto=proto).get_piece_size()
    warnings.warn(
        f"{name} corpus too small for vocab_size={vocab_size} ({detail}); "
        f"trained a vocabulary of {got} pieces instead",
        stacklevel=3,
    )
    return proto
