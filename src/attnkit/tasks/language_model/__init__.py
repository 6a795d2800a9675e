"""Language modelling: the Transformer's decoder alone, trained on text, continuing prompts.

training: :class:`LanguageModelTask`; inference: :class:`LanguageModel` (greedy, beam, sampling,
scoring, self-attention), which the server serves itself; metrics and the one evaluation:
:mod:`.scoring`.
"""

from typing import TYPE_CHECKING

from ...decoding.options import SearchOptions
from ...lazy import lazy_names
from ...plugin.info import TaskInfo

if TYPE_CHECKING:  # what a type checker sees; at run time each is imported when first asked for
    from .continuation import Generation, start_from_prompt
    from .generator import LanguageModel
    from .scoring import LMScores, lm_scores, score_texts
    from .training import LanguageModelTask, LMBatch

# A language model's search unless asked otherwise, on the command line, the server and in Python:
# greedy, and at most 40 new tokens (eos included) whatever the prompt's length.
SEARCH = SearchOptions(beam=1, max_len_a=0.0, max_len_b=40)

TASK = TaskInfo(
    name="generate",
    noun="a language model",
    archs=("lm",),
    records="text",
    training=".training:LanguageModelTask",
    open=".generator:LanguageModel.from_state",
    package=__name__,
    serve=".generator:LanguageModel.serve",
    endpoints=("generate", "completions", "chat/completions"),  # the last two OpenAI's (.openai_api)
    commands=("generate",),
)

__getattr__ = lazy_names(
    __name__,
    {
        "Generation": "continuation",
        "start_from_prompt": "continuation",
        "LanguageModel": "generator",
        "LMScores": "scoring",
        "lm_scores": "scoring",
        "score_texts": "scoring",
        "LanguageModelTask": "training",
        "LMBatch": "training",
    },
)

__all__ = [
    "SEARCH",
    "TASK",
    "Generation",
    "LMBatch",
    "LMScores",
    "LanguageModel",
    "LanguageModelTask",
    "lm_scores",
    "score_texts",
    "start_from_prompt",
]
