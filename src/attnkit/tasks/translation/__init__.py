"""Translation: sentence pairs in, sentences out (the paper's task).

training: :class:`TranslationTask`; inference: :class:`Translator` (greedy, beam, sampling, n-best,
attention maps); metrics and the one evaluation: :mod:`.scoring`; the server's model: :mod:`.served`.
"""

from typing import TYPE_CHECKING

from ...lazy import lazy_names
from ...plugin.info import TaskInfo

if TYPE_CHECKING:  # what a type checker sees; at run time each is imported when first asked for
    from .maps import AttentionMaps, attention_maps
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
    training=".training:TranslationTask",
    open=".translator:Translator.from_state",
    package=__name__,
    serve=".ct2_served:load_served",
    endpoints=("translate", "attention"),
    commands=("translate",),
)

__getattr__ = lazy_names(
    __name__,
    {
        "AttentionMaps": "maps",
        "attention_maps": "maps",
        "Evaluation": "scoring",
        "Scores": "scoring",
        "corpus_scores": "scoring",
        "evaluate": "scoring",
        "TranslationModel": "served",
        "TranslationStream": "stream",
        "TranslationTask": "training",
        "Translation": "translator",
        "Translator": "translator",
    },
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
