"""Captioning: an image in, a sentence about it out, each word's attention over the image's regions
(seed 002's "Show, Attend and Tell" picture).

training: :class:`CaptionTask`; inference: :class:`Captioner` (greedy, beam, sampling, each word's
attention), which the server serves itself; metrics and the one evaluation: :mod:`.scoring`; the
generated corpus: :mod:`.shapes`; a Hugging Face image-caption dataset in the same format:
:mod:`.hf_import`.
"""

from ...plugin.info import TaskInfo
from .attention_maps import CaptionAttention, caption_attention, region_mass
from .captioner import Caption, Captioner
from .corpus import CaptionRecord, ImageSet, load_captions
from .images import read_image
from .scoring import CaptionEvaluation, evaluate
from .shapes import make_shapes
from .training import CaptionBatch, CaptionTask

TASK = TaskInfo(
    name="caption",
    noun="a captioner",
    archs=("captioner",),
    records="pairs",
    training=CaptionTask,
    open=Captioner.from_state,
    package=__name__,
    serve=Captioner.serve,
    endpoints=("caption",),
    commands=("caption", "make-shapes", "import-captions"),
)

__all__ = [
    "TASK",
    "Caption",
    "CaptionAttention",
    "CaptionBatch",
    "CaptionEvaluation",
    "CaptionRecord",
    "CaptionTask",
    "Captioner",
    "ImageSet",
    "caption_attention",
    "evaluate",
    "load_captions",
    "make_shapes",
    "read_image",
    "region_mass",
]
