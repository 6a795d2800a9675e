"""Train a tiny Transformer to reverse sequences of symbols, then decode a few with beam search.

Runs in well under a minute on a laptop CPU: python examples/reverse_task.py
"""

import torch

from attnkit.decoding import beam_search
from attnkit.loss import label_smoothed_cross_entropy
from attnkit.model import Transformer, TransformerConfig

PAD, BOS, EOS, VOCAB = 0, 1, 2, 13


def batch(n: int, g: torch.Generator, length: int = 8):
    src = torch.randint(3, VOCAB, (n, length), generator=g)
    tgt = torch.cat([src.flip(1), torch.full((n, 1), EOS)], 1)  # reversed, then eos
    tgt_in = torch.cat([torch.full((n, 1), BOS), src.flip(1)], 1)  # teacher forcing input
    return src, tgt_in, tgt


def main() -> None:
    torch.manual_seed(0)
    cfg = TransformerConfig.preset("tiny", d_model=64, d_ff=128, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB)
    model = Transformer(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.98), eps=1e-9)
    g = torch.Generator().manual_seed(0)
    for step in range(1, 401):
        src, tgt_in, tgt_out = batch(64, g)
        out = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, epsilon=0.1, pad_id=PAD)
        opt.zero_grad()
        (out.loss / out.n_tokens).backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step}: loss per token {out.loss.item() / int(out.n_tokens):.3f}")
    model.eval()
    src, _, tgt = batch(5, torch.Generator().manual_seed(1))
    for s, hyps, ref in zip(src, beam_search(model, src, beam_size=4), tgt, strict=True):
        print(f"{s.tolist()} -> {hyps[0].tokens}  (expected {ref[:-1].tolist()})")


if __name__ == "__main__":
    main()
