"""int8 decoding: attnkit's own int8 against CTranslate2 int8, same model, same sentences, one run.

    PYTHONPATH=src python -m bench.int8 --checkpoint CKPT [--data-dir ../shared/data] [--sentences 1000]
                                        [--threads 2] [--repeats 3] [--out bench/results/int8.json]

The checkpoint is exported to CTranslate2 (float32 and int8) with attnkit's own converter, so all
four engines (attnkit float32 / int8, CTranslate2 float32 / int8) run the same weights. Each
translates test_2016_flickr (German -> English, the first N sentences) greedy and with beam 4
(attnkit: GNMT length penalty 0.6; CTranslate2: its length^0.6 normalisation), batches of 4000
source tokens sorted by length in both. Reported per engine and setting: sentences/s of wall time
(best of --repeats, and the median), sentences per CPU-second of the process (all its threads; the
robust number on a shared, oversubscribed host), cased BLEU (sacreBLEU) and the BLEU change against
float32 of the same engine. attnkit's timed call is ``Translator.translate`` on the raw sentences
(SentencePiece encoding and decoding included, as a user calls it); CTranslate2's is
``translate_batch`` on pieces prepared before the clock starts, after an untimed call on 64
sentences per setting. CTranslate2 runs in a process of its own (this script with --ct2-worker)
while this one waits, so its OpenMP threads never compete with torch's; the engines take turns at
every repeat, so the host's load hits all of them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # `python -m bench.int8` resolves from here

SETTINGS = {"greedy": 1, "beam4": 4}
BATCH_TOKENS = 4000


def _flickr(data_dir: str, n: int) -> tuple[list[str], list[str]]:
    from attnkit.data.multi30k import load_multi30k

    pairs = load_multi30k("test_2016_flickr", "de", "en", data_dir=data_dir)[:n]
    return [s for s, _ in pairs], [t for _, t in pairs]


def ct2_worker(job_path: str) -> int:
    """Time one CTranslate2 model on the job's sentences; prints JSON {setting: [seconds, texts]}."""
    import ctranslate2
    import sentencepiece as spm

    job = json.loads(Path(job_path).read_text())
    sp = spm.SentencePieceProcessor(model_file=os.path.join(job["model"], "sentencepiece.model"))
    translator = ctranslate2.Translator(
        job["model"],
        device="cpu",
        compute_type=job["compute_type"],
        inter_threads=1,
        intra_threads=job["threads"],
    )
    pieces = [p[: job["max_len"]] for p in sp.encode(job["sources"], out_type=str)]

    def translate(batch: list[list[str]], beam: int) -> list:
        return translator.translate_batch(
            batch,
            max_batch_size=BATCH_TOKENS,
            batch_type="tokens",
            beam_size=beam,
            length_penalty=0.6 if beam > 1 else 0.0,
            max_decoding_length=job["max_len"] - 1,
            max_input_length=job["max_len"],
        )

    for beam in SETTINGS.values():  # untimed: this process is fresh each repeat, attnkit's engine is warm
        translate(pieces[:64], beam)
    out = {}
    for name, beam in SETTINGS.items():
        t0, c0 = time.perf_counter(), time.process_time()
        results = translate(pieces, beam)
        seconds = [time.perf_counter() - t0, time.process_time() - c0]
        out[name] = [seconds, [sp.decode(r.hypotheses[0]) for r in results]]
    print(json.dumps(out))
    return 0


def _attnkit(translator, sources: list[str]) -> dict:
    out = {}
    for name, beam in SETTINGS.items():
        t0, c0 = time.perf_counter(), time.process_time()
        results = translator.translate(sources, beam=beam, length_penalty=0.6, batch_tokens=BATCH_TOKENS)
        out[name] = [[time.perf_counter() - t0, time.process_time() - c0], [r.text for r in results]]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint")
    p.add_argument("--data-dir", default=os.environ.get("ATTNKIT_DATA", "../shared/data"))
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="bench/results/int8.json")
    p.add_argument("--ct2-worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.ct2_worker:
        return ct2_worker(args.ct2_worker)
    if not args.checkpoint:
        p.error("--checkpoint is required")

    import sacrebleu
    import torch

    from attnkit.export import export_checkpoint
    from attnkit.tasks.translation import Translator

    torch.set_num_threads(args.threads)
    sources, refs = _flickr(args.data_dir, args.sentences)
    engines = {
        "attnkit float32": Translator.from_checkpoint(args.checkpoint, device="cpu"),
        "attnkit int8": Translator.from_checkpoint(args.checkpoint, device="cpu", quantize="int8"),
    }
    max_len = engines["attnkit float32"].max_src_len
    tmp = Path(tempfile.mkdtemp(prefix="int8-bench-"))
    jobs = {}
    for ct in ("float32", "int8"):
        export_checkpoint(args.checkpoint, "ctranslate2", tmp / ct, quantization=ct)
        job = dict(
            model=str(tmp / ct), compute_type=ct, threads=args.threads, sources=sources, max_len=max_len
        )
        (tmp / f"{ct}.json").write_text(json.dumps(job))
        jobs[f"ctranslate2 {ct}"] = tmp / f"{ct}.json"

    runs: dict[str, dict[str, list[float]]] = {e: {s: [] for s in SETTINGS} for e in [*engines, *jobs]}
    texts: dict[str, dict[str, list[str]]] = {e: {} for e in runs}
    for _ in range(args.repeats):
        for name in runs:  # the engines take turns at every repeat
            if name in engines:
                result = _attnkit(engines[name], sources)
            else:
                cmd = [sys.executable, "-m", "bench.int8", "--ct2-worker", str(jobs[name])]
                done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
                result = json.loads(done.stdout.strip().splitlines()[-1])
            for setting, (seconds, hyps) in result.items():
                runs[name][setting].append(seconds)
                texts[name][setting] = hyps

    report = {
        "command": " ".join(sys.argv),
        "checkpoint": args.checkpoint,
        "sentences": len(sources),
        "threads": args.threads,
        "repeats": args.repeats,
        "load_average": os.getloadavg(),
        "torch": torch.__version__,
        "results": {},
    }
    for name in runs:
        for setting in SETTINGS:
            bleu = sacrebleu.corpus_bleu(texts[name][setting], [refs]).score
            base = sacrebleu.corpus_bleu(texts[name.replace("int8", "float32")][setting], [refs]).score
            wall = [w for w, _ in runs[name][setting]]
            cpu = [c for _, c in runs[name][setting]]
            n = len(sources)
            report["results"].setdefault(setting, {})[name] = {
                "sent_per_s_best": n / min(wall),
                "sent_per_s_median": n / statistics.median(wall),
                "sent_per_cpu_s_best": n / min(cpu),
                "bleu": bleu,
                "bleu_change_vs_float32": bleu - base,
            }
    for setting, rows in report["results"].items():
        ct2, ct2_cpu = (
            rows["ctranslate2 int8"]["sent_per_s_best"],
            rows["ctranslate2 int8"]["sent_per_cpu_s_best"],
        )
        for name, row in rows.items():
            row["speed_vs_ct2_int8"] = row["sent_per_s_best"] / ct2
            row["cpu_speed_vs_ct2_int8"] = row["sent_per_cpu_s_best"] / ct2_cpu
            print(
                f"{setting:7s} {name:20s} {row['sent_per_s_best']:7.1f} sent/s wall (median "
                f"{row['sent_per_s_median']:.1f}) x{row['speed_vs_ct2_int8']:.2f}; "
                f"{row['sent_per_cpu_s_best']:7.1f} sent/CPU-s "
                f"x{row['cpu_speed_vs_ct2_int8']:.2f} of CT2 int8; "
                f"BLEU {row['bleu']:.2f} ({row['bleu_change_vs_float32']:+.2f})"
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
