"""fairseq's fastest corpus preparation, timed: SentencePiece encoding, then fairseq-preprocess.

    python bench/fairseq_prepare.py CORPUS_DIR SPM_MODEL --out DIR [--venv /work/fairseq-venv]
        [--encoder py|cli] [--workers 2] [--keep-text] [--json FILE]

The peer of ``attnkit prepare`` (SentencePiece ids into memory-mapped binary shards) on the same
files and the same SentencePiece model: what a fairseq user runs to get ``fairseq-train``'s binary
data. ``CORPUS_DIR`` holds ``train.de``, ``train.en``, ``valid.de``, ``valid.en`` (plain text, as
``bench/make_corpus.py`` writes them); the fairseq environment is made as bench/PEERS.md says.
Training-free; stdlib only (any Python 3.10+ runs it). Three timed phases:

1. encode: text -> space-separated pieces in ``DIR/text/``. Neither encoder has a thread option, so
   the parallelism is one process per language (2 processes; train and valid of that language).
   ``--encoder py`` (default): the loop of fairseq's ``scripts/spm_encode.py`` (``sentencepiece``
   Python API, one line at a time; without its empty-line filter) in the fairseq venv.
   ``--encoder cli``: SentencePiece's ``spm_encode`` binary (not in the pip wheel; Debian's
   ``sentencepiece`` package has it).
2. dict: ``DIR/dict.txt`` from ``SPM_MODEL``'s ``.vocab``, fairseq's ``piece 100`` format without the
   special pieces fairseq adds itself (``<pad> <s> </s> <unk>``; the usual ``tail -n +4`` recipe
   assumes SentencePiece's three default specials). With attnkit's ids (pad 0, bos 1, eos 2,
   unk 3) every piece keeps its SentencePiece id in fairseq (both number pieces from 4).
3. binarize: ``fairseq-preprocess --source-lang de --target-lang en --joined-dictionary --srcdict
   dict.txt --workers N`` into ``DIR/bin/`` (mmap ``.bin``/``.idx``, as fairseq-train reads them).

Each phase: wall seconds, training pairs per second, CPU seconds (user + system, ``/usr/bin/time -v``,
fairseq-preprocess's pool workers included; less sensitive than wall time to other jobs, not immune),
peak RSS per command as ``time -v`` reports it (the largest single process of it: GNU time takes
the children's maximum, not their sum) and the peak sum of RSS over the whole process tree,
sampled every 0.1 s from /proc.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

LANGS = ("de", "en")
SPECIALS = {"<pad>", "<s>", "</s>", "<unk>"}
PY_ENCODE = """import sys, sentencepiece as spm
sp = spm.SentencePieceProcessor(); sp.Load(sys.argv[1])
for src, dst in zip(sys.argv[2::2], sys.argv[3::2]):
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as o:
        for line in f:
            print(" ".join(sp.EncodeAsPieces(line.strip())), file=o)
"""


def tree_rss_kb(root: int) -> int:
    """Sum of VmRSS (kB) over ``root`` and its descendants, read from /proc."""
    parent, rss = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        pid = int(entry)
        parent[pid] = int(fields.get("PPid", "0"))
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(rss.get(p, 0) for p in tree)


def run_phase(cmds: list[list[str]], log_dir: Path, name: str) -> dict:
    """Run the commands at once, each under /usr/bin/time -v (output in LOG_DIR/NAME<i>.log): wall
    seconds of the phase, each command's peak RSS as time -v reports it, the process tree's peak sum."""
    procs = []
    t0 = time.perf_counter()
    for i, cmd in enumerate(cmds):
        tv, log = log_dir / f"{name}{i}.time", log_dir / f"{name}{i}.log"
        with open(log, "wb") as out:
            timed = ["/usr/bin/time", "-v", "-o", str(tv), *cmd]
            procs.append((subprocess.Popen(timed, stdout=out, stderr=subprocess.STDOUT), tv, log))
    tree_peak = 0
    while any(p.poll() is None for p, _, _ in procs):
        tree_peak = max(tree_peak, sum(tree_rss_kb(p.pid) for p, _, _ in procs))
        time.sleep(0.1)
    seconds = time.perf_counter() - t0
    peaks, cpu = [], 0.0
    for p, tv, log in procs:
        if p.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:]
            sys.exit(f"fairseq_prepare: {name} failed ({p.returncode}): {' '.join(p.args)}\n{tail}")
        report = tv.read_text()
        match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)
        peaks.append(int(match[1]) / 1024 if match else float("nan"))
        cpu += sum(float(t) for t in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", report))
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "time_v_max_rss_mb": peaks,
        "tree_rss_mb": tree_peak / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", type=Path, help="folder with train.de/en and valid.de/en")
    ap.add_argument("spm_model", type=Path, help="SentencePiece .model (its .vocab beside it)")
    ap.add_argument("--out", type=Path, required=True, help="output folder (text/, dict.txt, bin/)")
    ap.add_argument("--venv", type=Path, default=Path("/work/fairseq-venv"), help="fairseq's venv")
    ap.add_argument("--encoder", choices=["py", "cli"], default="py", help="see the docstring")
    ap.add_argument("--workers", type=int, default=2, help="fairseq-preprocess --workers (default 2)")
    ap.add_argument("--keep-text", action="store_true", help="keep the encoded text in OUT/text/")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    vocab = args.spm_model.with_suffix(".vocab")
    preprocess = args.venv / "bin" / "fairseq-preprocess"
    needed = [args.corpus / f"{s}.{lang}" for s in ("train", "valid") for lang in LANGS]
    for path in [*needed, args.spm_model, vocab, preprocess, Path("/usr/bin/time")]:
        if not path.exists():
            sys.exit(f"fairseq_prepare: missing {path}")
    if args.encoder == "cli" and subprocess.run(["which", "spm_encode"], capture_output=True).returncode:
        sys.exit("fairseq_prepare: no spm_encode on PATH (apt-get install sentencepiece)")
    text, bin_dir, logs = args.out / "text", args.out / "bin", args.out / "logs"
    for d in (text, logs):
        d.mkdir(parents=True, exist_ok=True)
    if bin_dir.exists() and any(bin_dir.iterdir()):
        sys.exit(f"fairseq_prepare: {bin_dir} is not empty (fairseq-preprocess would mix runs)")
    with open(args.corpus / "train.de", "rb") as f:
        pairs = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))

    cmds = []
    for lang in LANGS:
        splits = [(args.corpus / f"{s}.{lang}", text / f"{s}.{lang}") for s in ("train", "valid")]
        if args.encoder == "py":
            files = [str(p) for pair in splits for p in pair]
            cmds.append([str(args.venv / "bin" / "python"), "-c", PY_ENCODE, str(args.spm_model), *files])
        else:  # one spm_encode per language: train then valid, through a shell for the redirections
            q = shlex.quote
            model = q(str(args.spm_model))
            script = " && ".join(
                f"spm_encode --model={model} --output_format=piece < {q(str(i))} > {q(str(o))}"
                for i, o in splits
            )
            cmds.append(["sh", "-c", script])
    phases = {"encode": run_phase(cmds, logs, "encode")}

    t0 = time.perf_counter()
    pieces = [line.split("\t", 1)[0] for line in vocab.read_text(encoding="utf-8").splitlines()]
    (args.out / "dict.txt").write_text(
        "".join(f"{p} 100\n" for p in pieces if p not in SPECIALS), encoding="utf-8"
    )
    phases["dict"] = {"seconds": time.perf_counter() - t0}

    cmd = [str(preprocess), "--source-lang", "de", "--target-lang", "en", "--trainpref", str(text / "train"),
           "--validpref", str(text / "valid"), "--destdir", str(bin_dir), "--joined-dictionary",
           "--srcdict", str(args.out / "dict.txt"), "--workers", str(args.workers)]  # fmt: skip
    phases["binarize"] = run_phase([cmd], logs, "binarize")
    if not args.keep_text:
        for p in text.iterdir():
            p.unlink()
        text.rmdir()

    total = sum(p["seconds"] for p in phases.values())
    print(
        f"fairseq prepare of {args.corpus} ({pairs:,} train pairs), "
        f"encoder {args.encoder}, workers {args.workers}"
    )
    for name, p in phases.items():
        if name == "dict":
            print(f"  dict      {p['seconds']:8.2f} s")
            continue
        rss = ", ".join(f"{m:.0f}" for m in p["time_v_max_rss_mb"])
        print(
            f"  {name:9s} {p['seconds']:8.2f} s {pairs / p['seconds']:10,.0f} pairs/s  "
            f"{p['cpu_seconds']:7.1f} CPU s  "
            f"max RSS per command (time -v) {rss} MB, tree peak {p['tree_rss_mb']:.0f} MB"
        )
    size = sum(f.stat().st_size for f in bin_dir.iterdir()) / 2**20
    cpu = sum(p.get("cpu_seconds", 0.0) for p in phases.values())
    print(
        f"  total     {total:8.2f} s {pairs / total:10,.0f} pairs/s  {cpu:7.1f} CPU s  "
        f"{bin_dir}: {size:.1f} MiB"
    )
    if args.json:
        result = {
            "corpus": str(args.corpus),
            "pairs": pairs,
            "encoder": args.encoder,
            "workers": args.workers,
            "phases": phases,
            "total_seconds": total,
            "total_cpu_seconds": cpu,
            "bin_mib": size,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
