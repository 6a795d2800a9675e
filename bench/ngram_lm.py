"""Smoothed n-gram language-model baseline on attnkit's subwords (nltk.lm, interpolated Kneser-Ney).

The Transformer LM and this model must see the same tokens: pass the LM checkpoint and its
tokenizer is used, or ``--vocab-size`` to train a SentencePiece model on the training text the way
attnkit does (one model, special ids pad 0, bos 1, eos 2, unk 3). Each sentence is scored as the LM
scores it: every piece and the end of sentence, given the previous n-1 tokens (sentence-start
padding), so perplexities compare directly.

    ATTNKIT_DATA=/work/shared/data python -m bench.ngram_lm --lang en --checkpoint runs/lm_en/best.pt

nltk's ``KneserNey`` recounts the continuation counts of a context by scanning every n-gram on each
call, which takes hours on Multi30k; :class:`IndexedKneserNey` computes the same counts once into a
table (tests/test_bench_baselines.py checks that it scores exactly as nltk does). The order and
the discount are chosen on the validation split; the test split is scored once.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from pathlib import Path

from nltk.lm.models import InterpolatedLanguageModel
from nltk.lm.preprocessing import pad_both_ends
from nltk.lm.smoothing import KneserNey
from nltk.util import everygrams

ROOT = Path(__file__).resolve().parents[1]


class IndexedKneserNey(KneserNey):
    """nltk's Kneser-Ney smoothing with the continuation counts tabulated once, not rescanned.

    ``_continuation_counts(word, context)`` = (number of distinct x with (x, *context, word) seen,
    number of distinct (x, w') with (x, *context, w') seen): exactly what nltk computes.
    """

    def __init__(self, vocabulary, counter, order, discount=0.1, **kwargs):
        super().__init__(vocabulary, counter, order, discount=discount, **kwargs)
        self._word = None  # {(context, word): distinct left extensions}
        self._total = None  # {context: distinct (left extension, word) pairs}

    def _build(self) -> None:
        word, total = Counter(), Counter()
        for n in range(2, self._order + 1):
            for prefix, counts in self.counts[n].items():  # prefix = (x, *context), n-1 tokens
                context = prefix[1:]
                for w, c in counts.items():
                    if c > 0:
                        word[(context, w)] += 1
                        total[context] += 1
        self._word, self._total = word, total

    def _continuation_counts(self, word, context=tuple()):
        if self._word is None:
            self._build()
        context = tuple(context)
        return self._word[(context, word)], self._total[context]


class KneserNeyLM(InterpolatedLanguageModel):
    """Interpolated Kneser-Ney (nltk's ``KneserNeyInterpolated``) on the indexed smoothing."""

    def __init__(self, order: int, discount: float = 0.75, **kwargs):
        if not 0 <= discount <= 1:
            raise ValueError("discount must be in [0, 1]")
        super().__init__(IndexedKneserNey, order, params={"discount": discount, "order": order}, **kwargs)


def fit(sentences: list[list[str]], order: int, discount: float) -> KneserNeyLM:
    lm = KneserNeyLM(order, discount)
    padded = [list(pad_both_ends(s, n=order)) for s in sentences]
    lm.fit((everygrams(p, max_len=order) for p in padded), (t for p in padded for t in p))
    return lm


def score(lm: KneserNeyLM, sentences: list[list[str]], floor: float = 1e-12) -> dict:
    """Summed NLL (nats) of every piece and </s>; probabilities below ``floor`` are counted and floored."""
    n = lm.order
    nll, tokens, floored = 0.0, 0, 0
    cache: dict = {}
    for s in sentences:
        padded = list(pad_both_ends(s, n=n))  # n-1 <s> before, n-1 </s> after
        for i in range(n - 1, n + len(s)):  # each real token and the first </s>, no padding
            key = tuple(padded[i - n + 1 : i + 1])
            p = cache.get(key)
            if p is None:
                p = cache[key] = lm.score(key[-1], key[:-1])
            if p < floor:
                floored += 1
                p = floor
            nll -= math.log(p)
            tokens += 1
    return {"nll": nll, "tokens": tokens, "perplexity": math.exp(nll / tokens), "floored": floored}


def load_tokenizer(args, train_text: list[str]):
    from attnkit.data.tokenizer import SubwordTokenizer

    if args.checkpoint:
        from attnkit.checkpoint import load_checkpoint

        return SubwordTokenizer.from_state_dict(
            load_checkpoint(args.checkpoint)["tokenizer"]
        ), args.checkpoint
    return SubwordTokenizer.train(train_text, train_text, vocab_size=args.vocab_size), f"spm{args.vocab_size}"


def main(argv: list[str] | None = None) -> None:
    from attnkit.data.multi30k import multi30k_path
    from attnkit.data.readers import read_lines

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lang", default="en", help="Multi30k language (default en)")
    p.add_argument("--checkpoint", help="LM checkpoint whose tokenizer to use")
    p.add_argument("--vocab-size", type=int, default=4000, help="without --checkpoint: SentencePiece size")
    p.add_argument("--orders", default="3,4,5", help="n-gram orders tried on validation (default 3,4,5)")
    p.add_argument("--discounts", default="0.6,0.75,0.9", help="discounts tried on validation")
    p.add_argument("--test-split", default="test_2016_flickr")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)

    text = {
        split: read_lines(multi30k_path(split, args.lang, download=False))
        for split in ("train", "val", args.test_split)
    }
    tok, tok_name = load_tokenizer(args, text["train"])
    pieces = {split: [[str(i) for i in tok.encode(line)] for line in lines] for split, lines in text.items()}

    results = {"lang": args.lang, "tokenizer": tok_name, "validation": []}
    best = None
    for order in (int(o) for o in args.orders.split(",")):
        t0 = time.perf_counter()
        lm = fit(pieces["train"], order, 0.75)
        fit_s = time.perf_counter() - t0
        for discount in (float(d) for d in args.discounts.split(",")):
            lm.estimator.discount = discount  # the counts do not depend on the discount
            val = score(lm, pieces["val"])
            row = {
                "order": order,
                "discount": discount,
                "val_perplexity": val["perplexity"],
                "fit_s": round(fit_s, 1),
            }
            results["validation"].append(row)
            print(json.dumps(row), flush=True)
            if best is None or val["perplexity"] < best[0]:
                best = (val["perplexity"], order, discount)
    _, order, discount = best
    lm = fit(pieces["train"], order, discount)
    test = score(lm, pieces[args.test_split])
    results["test"] = {
        "split": args.test_split,
        "order": order,
        "discount": discount,
        **test,
        "bits_per_token": test["nll"] / test["tokens"] / math.log(2),
    }
    print(json.dumps(results["test"]))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
