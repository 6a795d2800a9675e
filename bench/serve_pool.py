"""The server's decoder without HTTP: closed-loop clients simulated in one process, CPU time.

N clients each keep one test_2016_flickr sentence in a :class:`~attnkit.tasks.translation.TranslationStream`
(the server's continuous beam search); a finished sentence is replaced by the next one at once.
Newcomers join under the server's rule (``--join-group``/``--join-wait-steps``). Every rule and
offline ``Translator.translate`` on the same sentences take turns, round after round, in the same
process and torch thread; the report is CPU ms per sentence and offline's CPU time over each rule's
(the "CPU efficiency" of docs/BENCHMARKS.md "Serving"), plus steps, joins and sentences per step,
and both sides' decoder calls, decoder rows (sentences x beams) and encoder calls, with the CPU
time inside those calls (the rest is the search around the model).
Each rule's translations are checked against offline's. With --compile each rule also runs with
``torch.compile(model.decode, dynamic=True)`` (plain weights: compile cannot trace the packed
products; --inductor cpp_wrapper,freezing as in bench.decode_step), its compilations counted.

    python -m bench.serve_pool --checkpoint CKPT --data-dir ../shared/data --rules 1/0,4/4 \
        [--compile]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch._dynamo.utils

from attnkit.decoding import SearchOptions
from attnkit.fast import packed_linears
from attnkit.tasks.translation import TranslationStream, Translator

from .decode_step import inductor_options
from .report import machine_info
from .serve_load import ROOT, sentences, source_lang


class ModelCalls:
    """Counts the model's decoder calls and rows (sentences x beams per step) and encoder calls, and
    the CPU time inside them: what the search around the model costs is the rest."""

    def __init__(self, model) -> None:
        self.decoder_calls = self.decoder_rows = self.encoder_calls = 0
        self.decoder_cpu = self.encoder_cpu = 0.0
        self.decode, encode = model.decode, model.encode  # self.decode: swapped for a compiled one

        def counted_decode(tokens, *args, **kwargs):
            self.decoder_calls, self.decoder_rows = self.decoder_calls + 1, self.decoder_rows + tokens.size(0)
            start = time.process_time()
            out = self.decode(tokens, *args, **kwargs)
            self.decoder_cpu += time.process_time() - start
            return out

        def counted_encode(*args, **kwargs):
            self.encoder_calls += 1
            start = time.process_time()
            out = encode(*args, **kwargs)
            self.encoder_cpu += time.process_time() - start
            return out

        model.decode, model.encode = counted_decode, counted_encode

    def take(self, sentences: int) -> dict:
        """The counts since the last take, with the CPU time in each kind of call per sentence."""
        counts = {
            "decoder_calls": self.decoder_calls,
            "decoder_rows": self.decoder_rows,
            "rows_per_decoder_call": round(self.decoder_rows / max(self.decoder_calls, 1), 1),
            "encoder_calls": self.encoder_calls,
            "decoder_cpu_ms_per_sentence": round(1000 * self.decoder_cpu / max(sentences, 1), 2),
            "encoder_cpu_ms_per_sentence": round(1000 * self.encoder_cpu / max(sentences, 1), 2),
        }
        self.decoder_calls = self.decoder_rows = self.encoder_calls = 0
        self.decoder_cpu = self.encoder_cpu = 0.0
        return counts


def closed_loop(
    translator: Translator, texts: list[str], clients: int, group: int, wait: int, beam: int
) -> dict:
    """Decode ``texts`` with ``clients`` in flight; returns the translations and the pool's counts."""
    stream = TranslationStream.start(translator, SearchOptions(beam=beam))
    waiting = [(i, texts[i]) for i in range(min(clients, len(texts)))]
    nxt, out, steps, joins, rows, held_since = len(waiting), {}, 0, 0, 0, 0
    while len(out) < len(texts):
        if waiting and (len(waiting) >= group or steps - held_since >= wait or len(stream) == 0):
            stream.add(waiting)
            joins, waiting = joins + 1, []
        if not waiting:
            held_since = steps
        rows += len(stream)
        for tag, result in stream.step():
            out[tag] = result.text
            if nxt < len(texts):
                waiting.append((nxt, texts[nxt]))
                nxt += 1
        steps += 1
    return {
        "texts": [out[i] for i in range(len(texts))],
        "steps": steps,
        "joins": joins,
        "sentences_per_step": round(rows / steps, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-dir", default=os.environ.get("ATTNKIT_DATA", "../shared/data"))
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument(
        "--source-lang", help="send test_2016_flickr.LANG.gz (default: the checkpoint's source language)"
    )
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--rules", default="1/0,4/4", help="join rules GROUP/WAIT_STEPS, comma-separated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compile", action="store_true", help="also run each rule with model.decode compiled")
    p.add_argument(
        "--inductor", default="", help="with --compile: Inductor options to switch on (cpp_wrapper,freezing)"
    )
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(1)
    texts = sentences(Path(args.data_dir), args.sentences, source_lang(args.checkpoint, args.source_lang))
    translator = Translator.from_checkpoint(args.checkpoint, device="cpu")
    rules = [tuple(int(x) for x in r.split("/")) for r in args.rules.split(",")]
    arms = [(r, "eager") for r in rules]
    arms += [(r, "compiled decode") for r in rules if args.compile]
    calls = ModelCalls(translator.model)  # the last round's counts are reported
    eager, compiled, options = calls.decode, None, inductor_options(p, args)
    graphs: list[int] = []  # Dynamo's compiled graphs after the warm-up and after each round
    if args.compile:
        compiled = torch.compile(eager, dynamic=True)
        calls.decode = compiled
        closed_loop(
            translator, texts[:48], args.clients, *rules[0], args.beam
        )  # the first compilations, not timed
        calls.decode = eager
        calls.take(len(texts))
        graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    cpu = {"offline": 0.0, **{arm: 0.0 for arm in arms}}
    info: dict = {}
    for _ in range(args.rounds):
        for arm in [None, *arms]:
            use_compiled = arm is not None and arm[1] != "eager"
            calls.decode = compiled if arm is not None and arm[1] == "compiled decode" else eager
            # as the server: weights packed once for its life (plain for compile, which cannot trace them)
            with contextlib.nullcontext() if use_compiled else packed_linears(translator.model):
                if not use_compiled:  # warm the packed weights (the compiled arm has none to warm)
                    translator.translate(texts[:4], beam=args.beam)
                calls.take(len(texts))
                start = time.process_time()
                if arm is None:
                    offline = [t.text for t in translator.translate(texts, beam=args.beam)]
                    cpu["offline"] += time.process_time() - start
                    offline_calls = calls.take(len(texts))
                    continue
                info[arm] = closed_loop(translator, texts, args.clients, *arm[0], args.beam)
                cpu[arm] += time.process_time() - start
                info[arm].update(calls.take(len(texts)))
                info[arm]["same_as_offline"] = sum(a == b for a, b in zip(info[arm].pop("texts"), offline))
        if args.compile:
            graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    n = len(texts) * args.rounds
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    result = {
        "command": " ".join(["python -m bench.serve_pool", *sys.argv[1:]]),
        "machine": machine_info("cpu"),
        "commit": head.stdout.strip() or None,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "sentences": len(texts),
        "clients": args.clients,
        "rounds": args.rounds,
        "offline_cpu_ms_per_sentence": round(1000 * cpu["offline"] / n, 2),
        "offline_calls": offline_calls,
        "rules": [],
    }
    for arm in arms:
        (group, wait), kind = arm
        result["rules"].append(
            {
                "join_group": group,
                "join_wait_steps": wait,
                "decoder": kind,
                **info[arm],
                "cpu_ms_per_sentence": round(1000 * cpu[arm] / n, 2),
                "cpu_efficiency_vs_offline": round(cpu["offline"] / cpu[arm], 3),
            }
        )
    if args.compile:
        result["inductor"] = options
        result["compilations"] = dict(torch._dynamo.utils.counters["stats"])
        result["graphs_after_warmup_and_each_round"] = graphs
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
