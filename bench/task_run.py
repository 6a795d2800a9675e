"""Train a language model or classifier config with the trainer, then score the best checkpoint on its
test split, and keep the numbers as JSON (for docs/BENCHMARKS.md).

    python -m bench.task_run configs/multi30k_langid.yaml --data-dir ../shared/data \
        [--max-minutes M] [KEY=VALUE ...]

The training is ``attnkit train`` itself (``attnkit.train.train``: resume, checkpoints, metrics CSV);
this script only adds the test-split score and writes ``<output_dir>/task_run.json``:
steps, minutes, the best validation score and the test perplexity (LM) or accuracy and macro-F1
(classifier).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch


def test_scores(cfg, best: Path) -> dict:
    """The best checkpoint's scores on the test split of the data it was trained on."""
    from attnkit.data.examples import load_records

    if cfg.arch == "lm":
        from attnkit.tasks.language_model import LanguageModel

        scores = LanguageModel.from_checkpoint(best, device="cpu").score(
            load_records(cfg.data, "test", "text")
        )
        return {
            "test_perplexity": scores.perplexity,
            "test_bits_per_token": scores.bits_per_token,
            "test_tokens": scores.tokens,
        }
    from attnkit.tasks.classification import Classifier

    clf = Classifier.from_checkpoint(best, device="cpu")
    report = clf.evaluate(load_records(cfg.data, "test", "labelled", labels=clf.labels))
    return {"test_accuracy": report.accuracy, "test_macro_f1": report.macro_f1}


def main(argv=None) -> None:
    from attnkit.train import load_config, train

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("overrides", nargs="*", help="section.key=value, as for attnkit train")
    p.add_argument("--data-dir", help="folder holding multi30k/")
    p.add_argument("--max-minutes", type=float, help="override train.max_minutes")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    if args.max_minutes is not None:
        overrides.append(f"train.max_minutes={args.max_minutes}")
    cfg = load_config(args.config, overrides)
    if cfg.arch not in ("lm", "classifier"):
        raise SystemExit(
            f"{args.config}: model.arch {cfg.arch!r}; this script runs lm and classifier configs"
        )
    torch.set_num_threads(args.threads)
    t0 = time.monotonic()
    result = train(cfg, overwrite=True)
    minutes = round((time.monotonic() - t0) / 60, 2)
    summary = {
        "config": args.config,
        "overrides": args.overrides,
        "steps": result.step,
        "train_minutes": minutes,
        "threads": args.threads,
        "valid_metric": result.metric,
        "valid_best": result.best_score,
        "test_split": cfg.data.spec("test").describe(),
        **test_scores(cfg, result.best_checkpoint),
    }
    print(json.dumps(summary), flush=True)
    (result.output_dir / "task_run.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
