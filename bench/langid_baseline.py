"""Language-identification baseline: character n-gram TF-IDF + logistic regression (scikit-learn).

Multi30k de / en / fr / cs: train on the train split, report accuracy and macro-F1 on
test_2016_flickr, on whole sentences and on the first three words only (``--first-words 3``, the
harder task; training then sees the first three words too, as the Transformer config does).

    ATTNKIT_DATA=/work/shared/data python -m bench.langid_baseline [--first-words 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

ROOT = Path(__file__).resolve().parents[1]

LANGS = ("de", "en", "fr", "cs")


def first_words(line: str, n: int | None) -> str:
    return line if n is None else " ".join(line.split()[:n])


def load(split: str, n_words: int | None) -> tuple[list[str], list[int]]:
    from attnkit.data.multi30k import multi30k_path
    from attnkit.data.readers import read_lines

    texts, labels = [], []
    for label, lang in enumerate(LANGS):
        for line in read_lines(multi30k_path(split, lang, download=False)):
            text = first_words(line, n_words)
            if text.strip():
                texts.append(text)
                labels.append(label)
    return texts, labels


def build_model(C: float = 10.0):
    """Character 1-4-grams inside word boundaries, sublinear TF-IDF, multinomial logistic regression."""
    return make_pipeline(
        TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), sublinear_tf=True, min_df=2),
        LogisticRegression(C=C, max_iter=1000),
    )


def main(argv: list[str] | None = None) -> None:
    from attnkit.tasks.classification import classification_report

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--first-words", type=int, default=None, help="keep only the first N words of each sentence"
    )
    p.add_argument("--test-split", default="test_2016_flickr")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)

    train_x, train_y = load("train", args.first_words)
    test_x, test_y = load(args.test_split, args.first_words)
    t0 = time.perf_counter()
    model = build_model().fit(train_x, train_y)
    fit_s = time.perf_counter() - t0
    report = classification_report(test_y, model.predict(test_x).tolist(), list(LANGS))
    print(report.format())
    results = {
        "task": "whole sentence" if args.first_words is None else f"first {args.first_words} words",
        "split": args.test_split,
        "accuracy": report.accuracy,
        "macro_f1": report.macro_f1,
        "train_examples": len(train_x),
        "test_examples": len(test_x),
        "fit_s": round(fit_s, 1),
    }
    print(json.dumps(results))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
