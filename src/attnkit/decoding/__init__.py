"""Search for the best output sequence over any incremental decoder: one loop, three strategies.

``run_search`` steps a decoder state with a strategy (:class:`Greedy`, :class:`Sampling`,
:class:`BeamSearch`) until every sequence finished. ``greedy_search``/``beam_search``/``sample_search``
translate a source batch; ``greedy_decode``/``beam_decode``/``sample_decode`` continue from any decoder
state (a language model's prompt, for instance); :class:`~.continuous.BeamPool` lets sentences join
a running beam search (a server). Any search may decode over a fixed layout (``layout=``, buffers
written in place), whose step :mod:`.compiled` compiles. :class:`Controls` (a repetition penalty,
an n-gram ban) and
forced prefixes (``prefix=``) reshape every search's steps; an :class:`Ensemble` of models decodes
as one.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:  # what a type checker sees; at run time each is imported when first asked for
    from .beam import BeamSearch, beam_decode, beam_search, length_penalty
    from .common import Hypothesis, length_limit, length_limits, start_from_source, step_log_probs
    from .controls import Controls
    from .ensemble import Ensemble
    from .greedy import greedy_decode, greedy_search
    from .loop import Greedy, Strategy, decode_step, run_search
    from .options import SearchOptions, check_nbest
    from .pick import decode, search
    from .sampling import Sampling, SamplingConfig, sample_decode, sample_search

__getattr__ = lazy_names(
    __name__,
    {
        "BeamSearch": "beam",
        "beam_decode": "beam",
        "beam_search": "beam",
        "length_penalty": "beam",
        "Hypothesis": "common",
        "length_limit": "common",
        "length_limits": "common",
        "start_from_source": "common",
        "step_log_probs": "common",
        "Controls": "controls",
        "Ensemble": "ensemble",
        "greedy_decode": "greedy",
        "greedy_search": "greedy",
        "SearchOptions": "options",
        "check_nbest": "options",
        "decode": "pick",
        "search": "pick",
        "Sampling": "sampling",
        "SamplingConfig": "sampling",
        "sample_decode": "sampling",
        "sample_search": "sampling",
        "Greedy": "loop",
        "Strategy": "loop",
        "decode_step": "loop",
        "run_search": "loop",
    },
)

__all__ = [
    "BeamSearch",
    "Controls",
    "Ensemble",
    "Greedy",
    "Hypothesis",
    "Sampling",
    "SamplingConfig",
    "SearchOptions",
    "Strategy",
    "beam_decode",
    "beam_search",
    "check_nbest",
    "decode",
    "decode_step",
    "greedy_decode",
    "greedy_search",
    "length_limit",
    "length_limits",
    "length_penalty",
    "run_search",
    "sample_decode",
    "sample_search",
    "search",
    "start_from_source",
    "step_log_probs",
]
