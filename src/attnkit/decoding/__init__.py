"""Search for the best output sequence: greedy and beam search over any incremental decoder.

``greedy_search``/``beam_search`` translate a source batch; ``greedy_decode``/``beam_decode``
continue from any decoder state (a language model's prompt, for instance).
"""

from .beam import beam_decode, beam_search, length_penalty
from .common import Hypothesis, check_nbest, length_limits, start_from_source, step_log_probs
from .greedy import greedy_decode, greedy_search

__all__ = [
    "Hypothesis",
    "beam_decode",
    "beam_search",
    "check_nbest",
    "greedy_decode",
    "greedy_search",
    "length_limits",
    "length_penalty",
    "start_from_source",
    "step_log_probs",
]
