"""Both seq2seq models learn a synthetic task to >= 95% exact match with greedy decoding, on CPU."""

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search
from attnkit.loss import label_smoothed_cross_entropy
from attnkit.model import RNNConfig, RNNSeq2Seq, Transformer, TransformerConfig

PAD, BOS, EOS, FIRST = 0, 1, 2, 3


pytestmark = pytest.mark.usefixtures("one_thread")


def task_batch(task: str, B: int, g: torch.Generator, vocab: int, max_len: int = 8):
    """Random sequences of symbols, right-padded; targets are the copy or the reversal."""
    lengths = torch.randint(3, max_len + 1, (B,), generator=g)
    src = torch.full((B, max_len), PAD)
    tgt = torch.full((B, max_len + 1), PAD)
    for i, n in enumerate(lengths.tolist()):
        seq = torch.randint(FIRST, vocab, (n,), generator=g)
        src[i, :n] = seq
        tgt[i, :n] = seq.flip(0) if task == "reverse" else seq
        tgt[i, n] = EOS
    tgt_in = torch.cat([torch.full((B, 1), BOS), tgt[:, :-1].masked_fill(tgt[:, :-1] == EOS, PAD)], 1)
    return src, tgt_in, tgt


def train(model, task: str, steps: int, lr: float, vocab: int, *, until=None, check_every: int = 250) -> int:
    """Train for ``steps`` steps, or until ``until(model)`` holds at a check; returns the steps taken."""
    torch.set_flush_denormal(True)  # as the trainer does on CPU: denormals slow the math ~10x
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    for step in range(1, steps + 1):
        src, tgt_in, tgt_out = task_batch(task, 64, g, vocab)
        out = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, epsilon=0.1, pad_id=PAD)
        opt.zero_grad()
        (out.loss / out.n_tokens).backward()
        opt.step()
        if until is not None and step % check_every == 0:
            if until(model.eval()):
                return step
            model.train()
    model.eval()
    return steps


def exact_match(model, task: str, vocab: int, beam: int = 1) -> float:
    src, _, tgt = task_batch(task, 200, torch.Generator().manual_seed(123), vocab)
    if beam == 1:
        hyps = [h.tokens for h in greedy_search(model, src, max_len_a=1.0, max_len_b=2)]
    else:
        hyps = [
            h[0].tokens
            for h in beam_search(model, src, beam_size=beam, length_penalty=0.0, max_len_a=1.0, max_len_b=2)
        ]
    refs = [[t for t in row.tolist() if t not in (PAD, EOS)] for row in tgt]
    return sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(refs)


@pytest.mark.parametrize("task", ["copy", "reverse"])
@pytest.mark.slow
def test_tiny_transformer_learns(task):
    torch.manual_seed(0)
    vocab = 13
    cfg = TransformerConfig.preset(
        "tiny", d_model=64, n_heads=4, d_ff=128, src_vocab_size=vocab, tgt_vocab_size=vocab, share_vocab=True
    )
    model = Transformer(cfg)

    # The steps needed depend on the CPU kind (the float summation order sends training down
    # another path), and training this small stack is not monotone: on an AVX-512 host fixed 400
    # steps of 2e-3 failed reversal for seed 0, and fixed 1000 or 1250 steps of 1e-3 failed for 1
    # of 18 seeds, seeds that had it at an earlier check. So: train until greedy and beam search
    # both get it, checked every 250 steps, for at most 2500 (18 of 18 seeds there, by step 750).
    def learned(m) -> bool:
        return exact_match(m, task, vocab) >= 0.95 and exact_match(m, task, vocab, beam=3) >= 0.95

    train(model, task, steps=2500, lr=1e-3 if task == "reverse" else 2e-3, vocab=vocab, until=learned)
    assert exact_match(model, task, vocab) >= 0.95
    assert exact_match(model, task, vocab, beam=3) >= 0.95
    # Without a length penalty, beam search never returns a less probable output than greedy search
    # (a sentence must not stop at K early, improbable eos endings while a better hypothesis lives).
    src, _, _ = task_batch(task, 100, torch.Generator().manual_seed(7), vocab)
    greedy = greedy_search(model, src, max_len_a=1.0, max_len_b=2)
    beam = beam_search(model, src, beam_size=3, length_penalty=0.0, max_len_a=1.0, max_len_b=2)
    assert all(b[0].log_prob >= g.log_prob - 1e-4 for g, b in zip(greedy, beam, strict=True))


@pytest.mark.parametrize("task", ["copy", "reverse"])
@pytest.mark.slow
def test_rnn_with_attention_learns(task):
    torch.manual_seed(0)
    vocab = 13
    cfg = RNNConfig.preset(
        "tiny", emb_size=32, hidden_size=64, attention_size=32, src_vocab_size=vocab, tgt_vocab_size=vocab
    )
    model = RNNSeq2Seq(cfg)
    train(model, task, steps=300, lr=5e-3, vocab=vocab)
    assert exact_match(model, task, vocab) >= 0.95
