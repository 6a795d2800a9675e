"""Translation: sentence pairs in, sentences out (the paper's task).

training: :class:`TranslationTask`; inference: :class:`Translator` (greedy, beam, sampling, n-best,
attention maps); metrics and the one evaluation: :mod:`.scoring`; the server's model: :mod:`.served`.
"""

from ...plugin.info import TaskInfo
from .attention_maps import AttentionMaps, attention_maps
from .ct2_served import load_served
from .scoring import Evaluation, Scores, corpus_scores, evaluate
from .served import TranslationModel
from .stream import TranslationStream
from .training import TranslationTask
from .translator import Translation, Translator

TASK = TaskInfo(
    name="translate",
    noun="a translation model",
    archs=("transformer", "rnn"),
    records="pairs",
    training=TranslationTask,
    open=Translator.from_state,
    package=__name__,
    serve=load_served,
    endpoints=("translate", "attention"),
    commands=("translate",),
)

__all__ = [
    "TASK",
    "AttentionMaps",
    "Evaluation",
    "Scores",
    "Translation",
    "TranslationModel",
    "TranslationStream",
    "TranslationTask",
    "Translator",
    "attention_maps",
    "corpus_scores",
    "evaluate",
]
