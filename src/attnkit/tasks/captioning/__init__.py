"""Captioning: an image in, a sentence about it out, each word's attention over the image's regions
(seed 002's "Show, Attend and Tell" picture).

training: :class:`CaptionTask`; inference: :class:`Captioner` (greedy, beam, sampling, each word's
attention), which the server serves itself; metrics and the one evaluation: :mod:`.scoring`; the
generated corpus: :mod:`.shapes`; a Hugging Face image-caption dataset in the same format:
:mod:`.hf_import`.
"""

from typing import TYPE_CHECKING

from ...decoding.options import SearchOptions
from ...lazy import lazy_names
from ...plugin.info import TaskInfo

if TYPE_CHECKING:  # what a type checker sees; at run time each is imported when first asked for
    from .attention_maps import CaptionAttention, caption_attention, region_mass
    from .captioner import Caption, Captioner
    from .corpus import CaptionRecord, ImageSet, load_captions
    from .images import read_image
    from .scoring import CaptionEvaluation, evaluate
    from .shapes import make_shapes
    from .training import CaptionBatch, CaptionTask

# A captioner's search unless asked otherwise, on the command line, the server and in Python: beam 4,
# and as many pieces as the model's positions allow (an image has no length to scale max_len_a by).
SEARCH = SearchOptions(max_len_a=0.0, max_len_b=256)

TASK = TaskInfo(
    name="caption",
    noun="a captioner",
    archs=("captioner",),
    records="pairs",
    training=".training:CaptionTask",
    open=".captioner:Captioner.from_state",
    package=__name__,
    serve=".captioner:Captioner.serve",
    endpoints=("caption",),
    commands=("caption", "make-shapes", "import-captions"),
)

__getattr__ = lazy_names(
    __name__,
    {
        "CaptionAttention": "attention_maps",
        "caption_attention": "attention_maps",
        "region_mass": "attention_maps",
        "Caption": "captioner",
        "Captioner": "captioner",
        "CaptionRecord": "corpus",
        "ImageSet": "corpus",
        "load_captions": "corpus",
        "read_image": "images",
        "CaptionEvaluation": "scoring",
        "evaluate": "scoring",
        "make_shapes": "shapes",
        "CaptionBatch": "training",
        "CaptionTask": "training",
    },
)

__all__ = [
    "SEARCH",
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
