"""attnkit's speed relative to its yardsticks across runs of bench.speed (before/after tables).

    python -m bench.compare before.json after.json [--labels BEFORE,AFTER]

Reads the JSON that ``python -m bench.speed --out ...`` writes and prints one markdown row per
setting: attnkit's median speed divided by the yardstick's median *in the same run* (training: HF
Marian; greedy and beam 4 decoding: CTranslate2 float32), so > 1.00x means attnkit is faster. The
best-of-N ratio is given beside it. Settings a run did not measure print as n/a.
"""

from __future__ import annotations

import argparse
import json
import sys

YARDSTICKS = {"train": "transformers-marian", "decode": "ctranslate2-float32"}


def ratios(results: dict) -> dict[str, tuple[float, float] | None]:
    """Setting -> (median, best) speed of attnkit / the yardstick's, per training and decoding setting."""
    out = {}
    for section, peer in YARDSTICKS.items():
        for setting, res in results[section].items():
            label = f"{'training' if section == 'train' else 'decoding'} {setting}"
            if "attnkit" in res and peer in res:
                a, p = res["attnkit"], res[peer]
                out[label] = (a["median"] / p["median"], a["best"] / p["best"])
            else:
                out[label] = None
    return out


def table(runs: dict[str, dict]) -> str:
    """Markdown: one row per setting, one column per run (``runs``: label -> bench.speed results)."""
    per_run = {label: ratios(r) for label, r in runs.items()}
    settings = list(dict.fromkeys(s for rs in per_run.values() for s in rs))
    header = ["attnkit speed / yardstick (median, best-of-N)", *runs]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in settings:
        cells = []
        for rs in per_run.values():
            r = rs.get(s)
            cells.append("n/a" if r is None else f"{r[0]:.2f}x (best {r[1]:.2f}x)")
        vs = "HF Marian" if s.startswith("training") else "CTranslate2 float32"
        lines.append(f"| {s} vs {vs} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="JSON files written by python -m bench.speed --out")
    ap.add_argument("--labels", default=None, help="comma list, one per file (default: the file names)")
    args = ap.parse_args(argv)
    labels = args.labels.split(",") if args.labels else args.results
    if len(labels) != len(args.results):
        ap.error(f"{len(labels)} labels for {len(args.results)} files")
    runs = {}
    for label, path in zip(labels, args.results):
        try:
            with open(path) as f:
                runs[label] = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            print(f"error: cannot read {path}: {e}", file=sys.stderr)
            return 2
    print(table(runs), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
