"""Which sentence splitter the translators use (attnkit.tasks.translation.segments), by measurement:
paragraphs made of the shipped corpus' sentences (test_2016_flickr, one sentence a line, in de, en,
fr and cs), joined by one space, split again by each candidate. Reported per language: the share of
paragraphs split back exactly into their sentences, and CPU-seconds per 1,000 sentences.

Candidates, each as its users run it: pysbd (rules per language, ``clean=False`` so the text is
kept; English rules where it has none, as segments.py does), sentence-splitter (Moses' splitter and
its non-breaking prefixes) and blingfire (one model for every language).

    python -m bench.sentence_split --data-dir ../shared/data [--out bench/results/sentence_split.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

LANGS = ("de", "en", "fr", "cs")


def paragraphs(lines: list[str], seed: int = 0) -> list[list[str]]:
    """The lines in order, grouped into paragraphs of 1 to 6 sentences."""
    rng, out, i = random.Random(seed), [], 0
    while i < len(lines):
        n = rng.randint(1, 6)
        out.append(lines[i : i + n])
        i += n
    return out


def splitters(lang: str) -> dict[str, Callable[[str], list[str]]]:
    """Each candidate's split of one paragraph, as its own users call it."""
    import blingfire
    import pysbd
    from sentence_splitter import SentenceSplitter

    try:
        sbd = pysbd.Segmenter(language=lang, clean=False)
    except ValueError:
        sbd = pysbd.Segmenter(language="en", clean=False)
    moses = SentenceSplitter(language=lang)
    return {
        "pysbd": lambda text: [s.strip() for s in sbd.segment(text) if s.strip()],
        "sentence-splitter": lambda text: [s for s in moses.split(text) if s],
        "blingfire": lambda text: [s for s in blingfire.text_to_sentences(text).split("\n") if s],
    }


def measure(data_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    results: dict[str, dict[str, dict[str, float]]] = {}
    for lang in LANGS:
        path = data_dir / "multi30k" / f"test_2016_flickr.{lang}.gz"
        lines = [x.strip() for x in gzip.open(path, "rt", encoding="utf-8") if x.strip()]
        groups = paragraphs(lines)
        results[lang] = {}
        for name, split in splitters(lang).items():
            start = time.process_time()
            exact = sum(split(" ".join(group)) == group for group in groups)
            cpu = time.process_time() - start
            results[lang][name] = {"exact": exact / len(groups), "cpu_s_per_1000": 1000 * cpu / len(lines)}
    return results


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    names = list(next(iter(results.values())))
    rows = [
        "| splitter | " + " | ".join(results) + " | CPU-s / 1,000 sentences (mean) |",
        "|---" * (len(results) + 2) + "|",
    ]
    for name in names:
        exact = " | ".join(f"{results[lang][name]['exact']:.1%}" for lang in results)
        cpu = sum(results[lang][name]["cpu_s_per_1000"] for lang in results) / len(results)
        rows.append(f"| {name} | {exact} | {cpu:.3f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = measure(args.data_dir)
    print("paragraphs split back exactly into their sentences:\n" + table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
