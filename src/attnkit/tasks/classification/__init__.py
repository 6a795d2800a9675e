"""Classification: an encoder reads a text (or a text pair) and pools it into one label.

training: :class:`ClassifierTask`; inference: :class:`Classifier` (labels, probabilities, each
word's pooling weight); metrics and the one evaluation: :mod:`.scoring`; the seeds' review picture:
:mod:`.highlight`; the server serves the wrapper itself.
"""

from ...plugin.info import TaskInfo
from .classifier import Classifier, WordWeights
from .inputs import classifier_pieces, example_text
from .scoring import ClassificationReport, classification_report, evaluate_examples, plot_confusion_matrix
from .training import ClassifierBatch, ClassifierTask

TASK = TaskInfo(
    name="classify",
    noun="a classifier",
    archs=("classifier",),
    records="labelled",
    training=ClassifierTask,
    open=Classifier.from_state,
    package=__name__,
    serve=Classifier.serve,
    endpoints=("classify",),
    commands=("classify",),
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
