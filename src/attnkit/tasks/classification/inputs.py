"""What a classifier reads: a text, or a text pair, as pieces within the model's length.

Training, validation, ``attnkit classify``, ``attnkit evaluate`` and the server encode through here,
so a text means the same ids to each of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...data.readers import LabelledExample
from ...data.tokenizer import SubwordTokenizer
from ...errors import DataError

Text = str | tuple[str, str]  # one text, or a (text_a, text_b) pair


def example_text(example: LabelledExample) -> Text:
    """The classifier's input of a labelled example: its text, or its (text_a, text_b) pair."""
    return example.text if example.text_b is None else (example.text, example.text_b)


def classifier_pieces(tokenizer: SubwordTokenizer, text: Text) -> list[int]:
    """A text's pieces; a pair is text_a's pieces, eos, text_b's pieces."""
    if isinstance(text, tuple):
        a, b = text
        return [*tokenizer.encode(a, side="src"), tokenizer.eos_id, *tokenizer.encode(b, side="src")]
    return tokenizer.encode(text, side="src")


def input_room(model_config) -> int:
    """Pieces a text may keep: the model's positions, less the CLS token of ``first`` pooling."""
    return int(model_config.max_len) - (1 if model_config.pooling == "first" else 0)


def encode_inputs(tokenizer: SubwordTokenizer, model_config, texts: Sequence[Text]) -> list[list[int]]:
    """Each text's pieces, a longer text read up to :func:`input_room`; an empty text is an error."""
    room = input_room(model_config)
    ids = []
    for n, text in enumerate(texts, start=1):
        seq = classifier_pieces(tokenizer, text)[:room]
        if not seq or (isinstance(text, str) and not text.strip()):
            raise DataError(f"input line {n} is empty: nothing to classify")
        ids.append(seq)
    return ids
