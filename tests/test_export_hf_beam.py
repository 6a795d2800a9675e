"""Hugging Face beam parity in seconds, without the corpus: ``MarianMTModel.generate(num_beams=K)``
on an exported checkpoint finds the same best hypothesis as attnkit's ``beam_search`` with beam K.

The model is tiny (d_model 32, 2+2 layers, a joint SentencePiece vocabulary of 50 pieces trained on
made-up sentences) and trained for 40 steps to reverse random token sequences: far from learned, so
its hypotheses end at many different steps and their scores lie close together, which is where two
searches part if they rank or stop differently. Both sides search without length normalization
(alpha = 0): Marian divides a finished hypothesis' log-probability by length^alpha and attnkit by
((5 + length) / 6)^alpha, so only alpha = 0 asks both for the same ranking. At the length limit HF
forces eos with log-probability 0 where attnkit keeps eos's own, so a sentence whose best hypothesis
reaches the limit may differ and is counted apart. tests/test_export_hf.py checks the same on a
model trained on Multi30k, when the corpus is there.
"""

from __future__ import annotations

import random

import pytest
import torch

from export_helpers import length_limit, require

N_SENTENCES = 40
TRAIN_STEPS = 40  # ~2 s on one thread; the hypotheses then run 0 to ~10 tokens, none to the limit
WORDS = (
    "ein zwei drei Hund Katze Mann Frau Kind läuft springt sitzt spielt im Park am See mit einem Ball".split()
)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train_to_reverse(model, steps: int):
    """``steps`` Adam steps of teacher forcing on random sequences of 2-10 tokens and their reversal."""
    from attnkit.loss import label_smoothed_cross_entropy

    cfg, g = model.config, torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    model.train()
    for _ in range(steps):
        src = torch.full((64, 10), cfg.pad_id)  # (B, S)
        tgt = torch.full((64, 11), cfg.pad_id)  # (B, T + 1): the reversal, then eos
        for i, n in enumerate(torch.randint(2, 11, (64,), generator=g).tolist()):
            seq = torch.randint(4, cfg.src_vocab_size, (n,), generator=g)
            src[i, :n], tgt[i, :n], tgt[i, n] = seq, seq.flip(0), cfg.eos_id
        tgt_in = torch.cat([torch.full((64, 1), cfg.bos_id), tgt[:, :-1]], 1).masked_fill(
            torch.cat([torch.zeros(64, 1, dtype=torch.bool), tgt[:, :-1] == cfg.eos_id], 1), cfg.pad_id
        )
        out = label_smoothed_cross_entropy(model(src, tgt_in), tgt, epsilon=0.1, pad_id=cfg.pad_id)
        opt.zero_grad()
        (out.loss / out.n_tokens).backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(attnkit model, MarianMTModel) of one tiny checkpoint exported to a Hugging Face folder."""
    require("transformers", "safetensors")
    from transformers import MarianMTModel

    from attnkit.checkpoint import save_checkpoint
    from attnkit.data.tokenizer import SubwordTokenizer
    from attnkit.export import export_checkpoint, load_for_export
    from attnkit.model import Transformer, TransformerConfig

    rng = random.Random(0)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(2, 8))) + "." for _ in range(400)]
    tokenizer = SubwordTokenizer.train(texts[:200], texts[200:], vocab_size=50, num_threads=1)
    vocab = tokenizer.src_vocab_size
    cfg = TransformerConfig.preset(
        "tiny", src_vocab_size=vocab, tgt_vocab_size=vocab, share_vocab=True, max_len=40
    )
    torch.manual_seed(0)
    model = train_to_reverse(Transformer(cfg), TRAIN_STEPS)
    root = tmp_path_factory.mktemp("hf-beam")
    checkpoint = save_checkpoint(
        {
            "arch": "transformer",
            "model_config": cfg.to_dict(),
            "tokenizer": tokenizer.state_dict(),
            "model": model.state_dict(),
        },
        root / "tiny.pt",
    )
    export_checkpoint(checkpoint, "huggingface", root / "hf")
    model, _ = load_for_export(checkpoint)
    return model, MarianMTModel.from_pretrained(str(root / "hf"), local_files_only=True).eval()


@pytest.mark.parametrize("beam", [2, 4])
def test_generate_beam_search_equals_attnkit_beam_search(exported, beam):
    from attnkit.decoding import beam_search

    model, hf = exported
    cfg = model.config
    g = torch.Generator().manual_seed(beam)
    differ, at_limit, lengths = [], 0, set()
    for i in range(N_SENTENCES):
        n = int(torch.randint(2, 12, (1,), generator=g))
        src = torch.randint(4, cfg.src_vocab_size, (1, n), generator=g)  # (1, S): no pad, bos or eos
        ours = beam_search(model, src, beam_size=beam, length_penalty=0.0)[0][0].tokens
        limit = length_limit(n, cfg.max_len)
        hit = len(ours) + 1 >= limit
        at_limit += hit
        lengths.add(len(ours))
        with torch.no_grad():
            out = hf.generate(
                input_ids=src,
                attention_mask=src != cfg.pad_id,
                num_beams=beam,
                do_sample=False,
                length_penalty=0.0,
                early_stopping=False,
                max_length=limit + 1,
            )[0].tolist()
        theirs = [t for t in out[1:] if t not in (cfg.eos_id, cfg.pad_id)]
        if ours != theirs and not hit:
            differ.append(i)
    assert at_limit <= N_SENTENCES // 10, f"{at_limit} sentences reached the length limit"
    assert len(lengths) >= 4, f"hypothesis lengths {sorted(lengths)}: too few to test when a search stops"
    assert not differ, f"{len(differ)}/{N_SENTENCES} beam-{beam} outputs differ (first: sentence {differ[0]})"
