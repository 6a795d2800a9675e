"""Where a captioner looks: on the generated shapes corpus, the attention a colour or shape word puts
inside its own object's box, against attention spread evenly over the image.

For every test image (``attnkit make-shapes`` writes each object's box to ``test.objects.jsonl``)
the captioner writes a greedy caption with the last decoder layer's cross-attention averaged over
heads. Captions read "a COLOUR SHAPE RELATION a COLOUR SHAPE": words 1, 2 belong to the first
object, the last two to the second. For each of those four words that equals the reference's word
it measures :func:`~attnkit.tasks.captioning.region_mass` (the attention on the regions overlapping
the box), and the same for uniform weights (about the box's share of the image).

    python -m bench.caption_attention --checkpoint runs/captions_shapes_tiny/checkpoint_best.pt \
        --corpus data/shapes [--out F]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from attnkit.attention.rollout import rollout
from attnkit.tasks.captioning import Captioner, region_mass

OBJECT_WORDS = {1: 0, 2: 0, -2: 1, -1: 1}  # word position in the caption -> which object it names


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--corpus", required=True, help="the make-shapes folder (test.tsv, test.objects.jsonl)")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    root = Path(args.corpus)
    scenes = [
        json.loads(line) for line in (root / "test.objects.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    refs = [line.split("\t")[1] for line in (root / "test.tsv").read_text(encoding="utf-8").splitlines()]
    captioner = Captioner.from_checkpoint(args.checkpoint, device="cpu")
    found = captioner.caption([str(root / s["image"]) for s in scenes], beam=1, return_attention=True)
    grid, size = captioner.model.grid, captioner.image_size
    exact, words, right, masses, uniform, rolled = 0, 0, 0, [], [], []
    for scene, ref, cap in zip(scenes, refs, found, strict=True):
        rollout = encoder_rollout(captioner, root / scene["image"])  # (R, R) or None
        exact += cap.text == ref
        got, want = cap.text.split(), ref.split()
        assert cap.attention is not None
        even = torch.full_like(cap.attention[0], 1.0 / cap.attention.size(1))  # (R,)
        for i, obj in OBJECT_WORDS.items():
            words += 1
            if len(got) != len(want) or got[i] != want[i]:
                continue
            right += 1
            box = tuple(scene["objects"][obj]["box"])
            masses.append(region_mass(cap.attention[i % len(got)], box, grid, size))
            uniform.append(region_mass(even, box, grid, size))
            if rollout is not None:  # the same word's attention followed through the encoder's layers
                rolled.append(region_mass(cap.attention[i % len(got)] @ rollout, box, grid, size))
    m = torch.tensor(masses)
    result = {
        "checkpoint": args.checkpoint,
        "images": len(scenes),
        "exact_captions": exact,
        "object_words_right": right / words,
        "mass_mean": float(m.mean()),
        "mass_above_half": float((m > 0.5).float().mean()),
        "uniform_mass_mean": float(torch.tensor(uniform).mean()),
        "rollout_mass_mean": float(torch.tensor(rolled).mean()) if rolled else None,
    }
    print(
        f"{exact}/{len(scenes)} captions exact; {right}/{words} colour and shape words right; their "
        f"attention inside their object's box: mean {result['mass_mean']:.3f} "
        f"({result['mass_above_half']:.0%} above 0.5), evenly spread {result['uniform_mass_mean']:.3f}"
    )
    if rolled:
        print(f"followed through the encoder (attention rollout): mean {result['rollout_mass_mean']:.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def encoder_rollout(captioner: Captioner, image: Path) -> torch.Tensor | None:
    """(R, R) the attention rollout of the captioner's encoder over one image's regions (Abnar and
    Zuidema, 2020), or None for a captioner whose regions go to the decoder as they are."""
    weights = captioner.encoder_attention(captioner.read(image))  # (L, H, R, R)
    return None if weights is None else rollout(weights)


if __name__ == "__main__":
    main()
