"""Language modelling: the Transformer's decoder alone, trained on text, continuing prompts.

training: :class:`LanguageModelTask`; inference: :class:`LanguageModel` (greedy, beam, sampling,
scoring, self-attention), which the server serves itself; metrics and the one evaluation:
:mod:`.scoring`.
"""

from ...plugin.info import TaskInfo
from .continuation import Generation, start_from_prompt
from .generator import LanguageModel
from .scoring import LMScores, lm_scores, score_texts
from .training import LanguageModelTask, LMBatch

TASK = TaskInfo(
    name="generate",
    noun="a language model",
    archs=("lm",),
    records="text",
    training=LanguageModelTask,
    open=LanguageModel.from_state,
    package=__name__,
    serve=LanguageModel.serve,
    endpoints=("generate",),
    commands=("generate",),
)

__all__ = [
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
