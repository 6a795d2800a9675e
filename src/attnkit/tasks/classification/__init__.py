"""Classification: an encoder reads a text (or a text pair) and pools it into one label.

training: :class:`ClassifierTask`; inference: :class:`Classifier` (labels, probabilities, each
word's pooling weight); metrics and the one evaluation: :mod:`.scoring`; the seeds' review picture:
:mod:`.highlight`; the server serves the wrapper itself.
"""

from typing import TYPE_CHECKING

from ...lazy import lazy_names
from ...plugin.info import TaskInfo

if TYPE_CHECKING:  # what a type checker sees; at run time each is imported when first asked for
    from .classifier import Classifier, WordWeights
    from .inputs import classifier_pieces, example_text
    from .scoring import ClassificationReport, classification_report, evaluate_examples, plot_confusion_matrix
    from .training import ClassifierBatch, ClassifierTask

TASK = TaskInfo(
    name="classify",
    noun="a classifier",
    archs=("classifier",),
    records="labelled",
    training=".training:ClassifierTask",
    open=".classifier:Classifier.from_state",
    package=__name__,
    serve=".classifier:Classifier.serve",
    endpoints=("classify",),
    commands=("classify",),
)

__getattr__ = lazy_names(
    __name__,
    {
        "Classifier": "classifier",
        "WordWeights": "classifier",
        "classifier_pieces": "inputs",
        "example_text": "inputs",
        "ClassificationReport": "scoring",
        "classification_report": "scoring",
        "evaluate_examples": "scoring",
        "plot_confusion_matrix": "scoring",
        "ClassifierBatch": "training",
        "ClassifierTask": "training",
    },
)

__all__ = [
    "TASK",
    "ClassificationReport",
    "Classifier",
    "ClassifierBatch",
    "ClassifierTask",
    "WordWeights",
    "classification_report",
    "classifier_pieces",
    "evaluate_examples",
    "example_text",
    "plot_confusion_matrix",
]
