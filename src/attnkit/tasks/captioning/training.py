"""Captioning as the trainer sees it: (image, caption) examples -> teacher-forced label-smoothed cross
entropy over the caption; validation loss and caption BLEU (through :func:`.scoring.evaluate`, as
``attnkit evaluate`` scores it).

An example is (image index, caption pieces); the images of a split are decoded once (an
:class:`~.corpus.ImageSet`) at the model's size. The tokenizer is trained on the training captions.
The sampler budgets ``train.max_tokens`` as regions (or caption pieces, if more) per image.

Legend: B images, C channels, S image size, T caption length, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from ...data.batching import pad_sequences
from ...data.config import DataConfig
from ...data.encoded import Encoded
from ...data.examples import train_text_tokenizer
from ...data.tokenizer import SubwordTokenizer
from ...errors import DataError
from ...linear_loss import output_loss
from ...loss import LossOutput, label_smoothed_cross_entropy
from ...model.config import CaptionerConfig
from ...plugin.training import SplitTask, mean_loss
from .captioner import Captioner
from .corpus import CaptionRecord, ImageSet, check_split, load_captions, references
from .images import as_floats
from .scoring import evaluate

if TYPE_CHECKING:
    from ...experiment import Experiment


@dataclass
class CaptionBatch:
    images: Tensor  # (B, C, S, S) uint8
    tgt_in: Tensor  # (B, T) bos + caption, right-padded
    tgt_out: Tensor  # (B, T) caption + eos, right-padded
    n_tgt_tokens: int

    def to(self, device, non_blocking: bool = False) -> CaptionBatch:
        return CaptionBatch(
            self.images.to(device, non_blocking=non_blocking),
            self.tgt_in.to(device, non_blocking=non_blocking),
            self.tgt_out.to(device, non_blocking=non_blocking),
            self.n_tgt_tokens,
        )

    def __len__(self) -> int:
        return self.images.size(0)


Example = tuple[ImageSet, int, list[int]]  # (the split's images, image index, caption ids)


class CaptionExamples(Sequence[Example]):
    """A split's (image index, caption ids) examples, each read with the images it indexes."""

    def __init__(self, images: ImageSet, examples: list[tuple[int, list[int]]]):
        self.images, self.examples = images, examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        image, ids = self.examples[i]
        return self.images, image, ids


class CaptionTask(SplitTask):
    """Keeps :class:`attnkit.plugin.Task`: records are :class:`~.corpus.CaptionRecord`."""

    records = "pairs"  # image<TAB>caption lines, read as a tsv corpus of pairs
    metric = "bleu"
    metrics: tuple[str, ...] = ("loss", "bleu")
    choices: ClassVar[dict[str, bool]] = {"bleu": True, "chrf": True, "loss": False}

    cfg: Experiment

    def __init__(self, cfg: Experiment, amp: torch.dtype | None = None):
        super().__init__(cfg, amp)
        self._images: dict[str, ImageSet] = {}  # one per split, by the tuple of its paths

    def load(self, data: DataConfig, which: str) -> list[CaptionRecord]:
        records = load_captions(data, which)
        check_split(records, which)
        return records

    def train_tokenizer(self, records: Sequence[CaptionRecord], seed: int) -> SubwordTokenizer:
        return train_text_tokenizer([r.caption for r in records], self.cfg.tokenizer, seed)

    def model_config(self, tokenizer: SubwordTokenizer) -> CaptionerConfig:
        """The run's model config: the image size, channels and grid the model reads."""
        cfg = self.cfg.model_config(tokenizer.vocabulary)
        assert isinstance(cfg, CaptionerConfig)  # this task's arch is the captioner
        return cfg

    def _image_set(self, paths: list[str], tokenizer: SubwordTokenizer) -> ImageSet:
        cfg = self.model_config(tokenizer)
        key = "\n".join(paths)
        if key not in self._images:
            self._images[key] = ImageSet(paths, size=cfg.image_size, channels=cfg.channels)
        return self._images[key]

    def encode(
        self, records: Sequence[CaptionRecord], tokenizer: SubwordTokenizer, max_len: int, *, split: str
    ) -> Encoded:
        """(image index, pieces) per record; a training caption over ``max_len`` pieces is skipped,
        a validation one cut (its loss is measured on the pieces the model can place)."""
        paths, _ = references(records)
        images = self._image_set(paths, tokenizer)
        index = {p: i for i, p in enumerate(paths)}
        examples, skipped = [], 0
        for r in records:
            ids = tokenizer.encode(r.caption, side="tgt")
            if not ids:
                raise DataError(f"the {split} split's caption of {r.image} has no subword tokens")
            if len(ids) > max_len:
                if split == "train":
                    skipped += 1
                    continue
                ids = ids[:max_len]
            examples.append((index[r.image], ids))
        if not examples:
            raise DataError(f"every {split} caption is longer than {max_len} pieces")
        cfg = self.model_config(tokenizer)
        stride = cfg.patch_size if cfg.encoder == "patches" else 32  # a ResNet's last map: stride 32
        regions = math.ceil(cfg.image_size / stride) ** 2  # the sampler budgets regions (or pieces, if more)
        lengths = [(regions, len(ids)) for _, ids in examples]
        dropped = f"skipped {skipped} {split} caption(s) over {max_len} pieces" if skipped else ""
        return Encoded(CaptionExamples(images, examples), lengths, dropped)

    def collate(self, examples: Sequence[Example], tokenizer: SubwordTokenizer) -> CaptionBatch:
        v = tokenizer.vocabulary
        tgt_in = pad_sequences([[v.bos_id, *ids] for _, _, ids in examples], v.pad_id)  # (B, T)
        tgt_out = pad_sequences([[*ids, v.eos_id] for _, _, ids in examples], v.pad_id)  # (B, T)
        n = sum(len(ids) + 1 for _, _, ids in examples)
        images = examples[0][0]  # a batch comes from one split
        return CaptionBatch(images.batch([i for _, i, _ in examples]), tgt_in, tgt_out, n)

    def loss(
        self, model, batch: CaptionBatch, tokenizer, *, epsilon: float, loss_fn=label_smoothed_cross_entropy
    ) -> LossOutput:
        inputs = (as_floats(batch.images), batch.tgt_in)
        pad_id = tokenizer.vocabulary.pad_id
        return output_loss(model, inputs, batch.tgt_out, loss_fn, epsilon=epsilon, pad_id=pad_id)

    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        v = self.cfg.valid
        loss = mean_loss(self, model, tokenizer, valid, device, batch_tokens=v.batch_tokens, amp=self.amp)
        paths, refs = references(records[: v.max_sentences or None])
        images = self._image_set(references(records)[0], tokenizer)
        pixels = [images[i] for i in range(len(paths))]  # the first images of the split's order
        result = evaluate(
            Captioner(model, tokenizer, device),
            pixels,
            refs,
            beam=v.beam_size,
            length_penalty=v.length_penalty,
        )
        found = {"loss": loss, "bleu": result.scores.bleu, "chrf": result.scores.chrf}
        return {name: found[name] for name in self.metrics}
