"""Hugging Face beam parity on any checkpoint: ``MarianMTModel.generate(num_beams=4)`` against attnkit's
beam 4, one sentence at a time, for length penalties 0 and 0.6 on both sides.

    PYTHONPATH=src python -m bench.hf_beam --checkpoint CKPT [--data-dir ../shared/data] [--sentences 100]

The two length penalties are not the same function (Marian: log P / length^alpha; attnkit: the GNMT
log P / ((5 + length) / 6)^alpha), so only alpha = 0 asks both for the same ranking; the count at
0.6 shows how often the conventions alone change the output. tests/test_export_hf.py checks alpha = 0
on the model the test session trains.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-dir", default=os.environ.get("ATTNKIT_DATA", "../shared/data"))
    p.add_argument("--sentences", type=int, default=100)
    args = p.parse_args()

    from transformers import MarianMTModel

    from attnkit.data.multi30k import load_multi30k
    from attnkit.decoding import beam_search
    from attnkit.decoding.common import length_limits
    from attnkit.export import export_checkpoint, load_for_export

    torch.set_num_threads(1)
    out = os.path.join(tempfile.mkdtemp(prefix="hf-beam-"), "hf")
    export_checkpoint(args.checkpoint, "huggingface", out)
    model, tok = load_for_export(args.checkpoint)
    cfg = model.config
    hf = MarianMTModel.from_pretrained(out, local_files_only=True).eval()
    sources = [
        s for s, _ in load_multi30k("test_2016_flickr", "de", "en", data_dir=args.data_dir)[: args.sentences]
    ]
    for alpha in (0.0, 0.6):
        same = at_limit = 0
        for text in sources:
            ids = tok.encode(text, side="src")[: cfg.max_len]
            src = torch.tensor([ids])
            ours = beam_search(model, src, beam_size=4, length_penalty_alpha=alpha)[0][0].tokens
            limit = int(length_limits(torch.tensor([len(ids)]), 1.5, 10, cfg.max_len - 1)[0])
            at_limit += len(ours) + 1 >= limit
            with torch.no_grad():
                gen = hf.generate(
                    input_ids=src,
                    attention_mask=src != cfg.pad_id,
                    num_beams=4,
                    do_sample=False,
                    length_penalty=alpha,
                    early_stopping=False,
                    max_length=limit + 1,
                )[0].tolist()
            same += ours == [t for t in gen[1:] if t not in (cfg.eos_id, cfg.pad_id)]
        print(f"length penalty {alpha}: {same}/{len(sources)} identical; {at_limit} reached the length limit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
