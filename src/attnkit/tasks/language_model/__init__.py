"""Language modelling: the Transformer's decoder alone, trained on text, continuing prompts.

training: :class:`LanguageModelTask`; inference: :class:`LanguageModel` (greedy, beam, sampling,
scoring, self-attention); metrics and the one evaluation: :mod:`.scoring`; the server's model:
:mod:`.served`.
"""

from ...plugin.info import TaskInfo
from .generator import Generation, LanguageModel, start_from_prompt
from .scoring import LMScores, lm_scores, score_texts
from .served import LanguageModelServed
from .training import LanguageModelTask, LMBatch

TASK = TaskInfo(
    name="generate",
    noun="a language model",
    archs=("lm",),
    records="text",
    training=LanguageModelTask,
    open=LanguageModel.from_state,
    package=__name__,
    serve=LanguageModelServed.load,
    endpoints=("generate",),
    commands=("generate",),
)

__all__ = [
    "TASK",
    "Generation",
    "LMBatch",
    "LMScores",
    "LanguageModel",
    "LanguageModelServed",
    "LanguageModelTask",
    "lm_scores",
    "score_texts",
    "start_from_prompt",
]
