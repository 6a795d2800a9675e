"""Interim runner for the classifier configs until ``attnkit train`` takes model.arch classifier.

    python bench/task_run.py configs/multi30k_langid.yaml [--max-minutes M]

(Language models now train through ``attnkit train`` (model.arch: lm); the LM numbers in
docs/BENCHMARKS.md came from this script's LM path at commit 3911ee3.)

Reads the same YAML sections (data, tokenizer, model, train, valid), trains with the task objects
(attnkit.train.lm_task / classifier_task), the token-budget batch sampler, Adam and the config's
learning-rate schedule, validates every ``valid.every`` steps, keeps the best checkpoint by the
task's metric (an ordinary attnkit checkpoint: ``attnkit evaluate / generate / classify`` read it) and
scores the test split with it. No resume, no DDP: the trainer has those.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from attnkit.checkpoint import save_checkpoint  # noqa: E402
from attnkit.classify import read_labelled_file  # noqa: E402
from attnkit.data.batching import TokenBatchSampler  # noqa: E402
from attnkit.data.readers import read_lines  # noqa: E402
from attnkit.data.multi30k import multi30k_path  # noqa: E402
from attnkit.data.tokenizer import SubwordTokenizer  # noqa: E402
from attnkit.model import ClassifierConfig, LMConfig, TransformerClassifier, TransformerLM, count_parameters  # noqa: E402
from attnkit.train.classifier_task import ClassifierTask  # noqa: E402
from attnkit.train.lm_task import LanguageModelTask  # noqa: E402
from attnkit.train.schedule import lr_at  # noqa: E402


def load_split(data: dict, which: str, labels=None):
    if data["corpus"] == "multi30k":
        return read_lines(
            multi30k_path(data[f"{which}_split"], data["lang"], data.get("data_dir") or None, download=False)
        )
    gold, texts = read_labelled_file(data[f"{which}_files"][0], labels)
    pair = lambda t: t if isinstance(t, tuple) else (t, None)  # noqa: E731
    return [
        type("R", (), {"label": g, "text": pair(t)[0], "text_b": pair(t)[1]})
        for g, t in zip(gold, texts, strict=True)
    ]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--max-minutes", type=float, help="override train.max_minutes")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text())
    data, model_cfg, t, v = cfg["data"], dict(cfg["model"]), cfg["train"], cfg["valid"]
    torch.set_num_threads(args.threads)
    torch.manual_seed(t.get("seed", 1))
    arch = model_cfg.pop("arch")
    out = Path(cfg["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()

    if arch == "lm":
        raise SystemExit("language models train through `attnkit train` now (model.arch: lm)")
    if arch == "lm-interim":
        train_text = load_split(data, "train")
        tok = SubwordTokenizer.train(train_text, train_text, vocab_size=cfg["tokenizer"]["vocab_size"])
        task, labels = LanguageModelTask(tok), None
        model = TransformerLM(LMConfig.from_dict({**model_cfg, "vocab_size": tok.src_vocab_size}))
        room = min(data.get("max_len", 128), model.config.max_len - 1)
        train, _, n_long = task.encode(train_text, room)
        valid = task.encode(load_split(data, "valid"), model.config.max_len - 1)[0]
        test = task.encode(load_split(data, "test"), model.config.max_len - 1)[0]
    else:
        records = load_split(data, "train", labels=None)
        labels = sorted({r.label for r in records})
        tok = SubwordTokenizer.train([r.text for r in records], [r.text for r in records],
                                     vocab_size=cfg["tokenizer"]["vocab_size"])  # fmt: skip
        task = ClassifierTask(tok, labels)
        model = TransformerClassifier(ClassifierConfig.from_dict({**model_cfg, "vocab_size": tok.src_vocab_size,
                                                                 "n_classes": len(labels)}))  # fmt: skip
        room = model.config.max_len - (1 if model.config.pooling == "first" else 0)
        train = task.encode(records, room)[0]
        valid = task.encode(load_split(data, "valid", labels), room)[0]
        test = task.encode(load_split(data, "test", labels), room)[0]
    print(f"{arch}: {count_parameters(model):,} parameters, {len(train):,} training examples, "
          f"vocabulary {tok.src_vocab_size}, setup {time.monotonic() - t_start:.0f}s", flush=True)  # fmt: skip

    def batches(examples, max_tokens):
        sampler = TokenBatchSampler(task.lengths(examples), max_tokens, shuffle=False)
        return [task.collate([examples[i] for i in idx]) for idx in sampler]

    valid_batches, test_batches = batches(valid, 8000), batches(test, 8000)
    sampler = TokenBatchSampler(task.lengths(train), t["max_tokens"], shuffle=True, seed=t.get("seed", 1))
    opt = torch.optim.Adam(model.parameters(), lr=t["lr"], betas=(0.9, 0.98), eps=1e-9)
    budget = 60 * (args.max_minutes if args.max_minutes is not None else t["max_minutes"])
    state = {"arch": arch, "tokenizer": tok.state_dict(), "experiment": {"data": data}, "labels": labels}
    best, step, history, t0 = None, 0, [], time.monotonic()
    it = iter(sampler)
    while time.monotonic() - t0 < budget and step < t["max_steps"]:
        try:
            idx = next(it)
        except StopIteration:
            it = iter(sampler)
            continue
        model.train()
        batch = task.collate([train[i] for i in idx])
        loss, _ = task.loss(model, batch)
        step += 1
        for g in opt.param_groups:
            g["lr"] = lr_at(step, schedule=t["schedule"], lr=t["lr"], lr_scale=1.0,
                            warmup_steps=t["warmup_steps"], d_model=model.config.d_model)  # fmt: skip
        opt.zero_grad(set_to_none=True)
        (loss / batch.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.get("clip_norm", 1.0))
        opt.step()
        if step % v["every"] == 0 or time.monotonic() - t0 >= budget:
            result = task.evaluate(model.eval(), valid_batches)
            score = task.score(result)
            history.append(
                {"step": step, "minutes": round((time.monotonic() - t0) / 60, 2), task.metric: score}
            )
            print(json.dumps(history[-1]), flush=True)
            better = best is None or (score > best if task.higher_is_better else score < best)
            if better:
                best = score
                save_checkpoint({**state, "model_config": model.config.to_dict(), "model": model.state_dict(),
                                 "step": step}, out / "checkpoint_best.pt")  # fmt: skip
    from attnkit.checkpoint import load_checkpoint, model_from_checkpoint

    best_model = model_from_checkpoint(load_checkpoint(out / "checkpoint_best.pt")).eval()
    result = task.evaluate(best_model, test_batches)
    summary = {"config": args.config, "steps": step, "train_minutes": round((time.monotonic() - t0) / 60, 2),
               "threads": args.threads, "valid_best": best, "test_split": data.get("test_split") or data["test_files"][0],
               "history": history}  # fmt: skip
    if arch == "lm":
        summary.update(
            test_perplexity=result.perplexity,
            test_bits_per_token=result.bits_per_token,
            test_tokens=result.tokens,
        )
    else:
        summary.update(test_accuracy=result.accuracy, test_macro_f1=result.macro_f1)
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}), flush=True)
    (out / "task_run.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
