"""What the translator checks of its inputs and options, and how it cuts sentences into batches."""

from __future__ import annotations

import operator

from ...errors import ConfigError, DataError


def check_sentences(sentences, *, what: str = "sentence") -> list[str]:
    """A str (one sentence) or an iterable of str as a list; anything else, or text with undecodable
    characters, is a DataError naming the item (``what`` it is)."""
    if isinstance(sentences, str):
        return [sentences]
    if isinstance(sentences, (bytes, bytearray)) or not hasattr(sentences, "__iter__"):
        raise DataError(f"translate() takes a str or a list of str, got {type(sentences).__name__}")
    sentences = list(sentences)
    for i, text in enumerate(sentences):
        if not isinstance(text, str):
            raise DataError(f"{what} {i} is a {type(text).__name__}, not a str")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise DataError(
                f"{what} {i} is not valid text: undecodable character {text[e.start]!r} at "
                f"position {e.start} (was the input UTF-8?)"
            ) from None
    return sentences


def check_batch_tokens(batch_tokens: int) -> None:
    try:
        positive = not isinstance(batch_tokens, bool) and operator.index(batch_tokens) >= 1
    except TypeError:
        positive = False
    if not positive:
        raise ConfigError(f"batch_tokens must be a positive integer, got {batch_tokens!r}")


def length_batches(order: list[int], ids: list[list[int]], batch_tokens: int):
    """Consecutive runs of the length-sorted ``order`` whose padded size stays under the budget."""
    batch: list[int] = []
    for i in order:
        width = len(ids[i])  # sorted by length: the newest is the longest
        if batch and width * (len(batch) + 1) > batch_tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch
