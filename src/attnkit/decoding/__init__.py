"""Search for the best output sequence: greedy and beam search over the cached decoder."""

from .beam import beam_search, length_penalty
from .common import Hypothesis
from .greedy import greedy_search

__all__ = ["Hypothesis", "beam_search", "greedy_search", "length_penalty"]
