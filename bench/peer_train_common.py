"""Shared pieces of bench.peer_train: checks, Multi30k text files, the SentencePiece model, the
wall-clock-budgeted trainer run, the thread settings and scoring with attnkit's own sacreBLEU call.

Runs in attnkit's environment (sentencepiece, sacrebleu, attnkit on PYTHONPATH); the peers run in
their own environment (``--benchenv``) as subprocesses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}  # our name -> Multi30k's
SP_VOCAB_SIZE = 8000  # configs/multi30k_de_en_best.yaml: tokenizer vocab_size 8000, unigram, joint
SP_MODEL_TYPE = "unigram"


class PeerError(Exception):
    """A problem the user can fix (missing environment, data, checkpoint): one line, exit 2."""


def fail(msg: str) -> None:
    print(f"peer_train: error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def check_benchenv(python: Path, module: str) -> None:
    """The peer's interpreter exists and imports the peer (else a one-line PeerError)."""
    if not python.is_file():
        raise PeerError(f"no peer environment: {python} does not exist (see bench/PEERS.md, Install)")
    res = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        raise PeerError(f"{python} cannot import {module} ({last}); install it as bench/PEERS.md says")


def write_corpus(
    data_dir: Path, src: str, tgt: str, out: Path, limit: int | None = None
) -> dict[str, dict[str, Path]]:
    """Multi30k, read by attnkit's own loader (which checks the files and their alignment), as plain
    text out/{train,valid,test}.{src,tgt}, line for line (``limit``: the first lines of train and val
    only, for --smoke)."""
    from attnkit.data.multi30k import load_multi30k
    from attnkit.errors import AttnkitError

    files: dict[str, dict[str, Path]] = {}
    out.mkdir(parents=True, exist_ok=True)
    for split, name in SPLITS.items():
        files[split] = {lang: out / f"{split}.{lang}" for lang in (src, tgt)}
        if all(p.is_file() for p in files[split].values()):
            continue
        try:
            pairs = load_multi30k(name, src, tgt, data_dir=data_dir, download=False)
        except AttnkitError as err:
            raise PeerError(f"Multi30k {name}: {err}") from err
        if limit is not None and split != "test":
            pairs = pairs[:limit]
        for i, lang in enumerate((src, tgt)):
            files[split][lang].write_text("".join(pair[i] + "\n" for pair in pairs), encoding="utf-8")
    return files


def train_sentencepiece(lines: list[str], prefix: Path, *, specials: dict[str, int] | None = None) -> Path:
    """A joint unigram model of SP_VOCAB_SIZE pieces on ``lines`` (source + target training text),
    as attnkit's best recipe uses (character_coverage 1.0). ``specials``: piece ids the peer needs."""
    import sentencepiece as spm

    model = prefix.with_suffix(".model")
    if model.is_file():
        return model
    opts = dict(
        model_prefix=str(prefix),
        vocab_size=SP_VOCAB_SIZE,
        model_type=SP_MODEL_TYPE,
        character_coverage=1.0,
        num_threads=1,  # the machine is shared; unigram pieces depend on the thread count
        minloglevel=1,
        hard_vocab_limit=False,  # an upper bound: the --smoke corpus is too small for 8,000 pieces
    )
    opts.update(specials or {})
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), **opts)
    except RuntimeError as err:
        raise PeerError(f"training the SentencePiece model failed: {err}") from err
    return model


def thread_env(threads: int, site_dir: Path) -> dict[str, str]:
    """Environment for a peer process limited to ``threads`` threads: OMP/MKL variables, and a
    sitecustomize that calls torch.set_num_threads (the peers have no thread option on CPU)."""
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(
        "import os\n"
        "if os.environ.get('PEER_TORCH_THREADS'):\n"
        "    import torch\n"
        "    torch.set_num_threads(int(os.environ['PEER_TORCH_THREADS']))\n"
        "    torch.set_num_interop_threads(1)\n"
    )
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PEER_TORCH_THREADS"):
        env[var] = str(threads)
    env["PYTHONPATH"] = str(site_dir)  # the peer's own packages only, plus the sitecustomize
    env["CUDA_VISIBLE_DEVICES"] = ""
    # OpenNMT-py 3.5 reloads its own checkpoints (argparse.Namespace inside) with a plain torch.load,
    # written before torch 2.6 made weights_only=True the default; this restores the old default for
    # the peers' own files only (attnkit's process is not affected).
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    return env


def run_budgeted(
    cmd: list[str], env: dict, log: Path, minutes: float, *, cwd: Path, grace_s: float = 300.0
) -> dict:
    """Run ``cmd`` until it ends or ``minutes`` after its start; then SIGINT (Ctrl-C, what a user
    does), and SIGKILL if still alive ``grace_s`` later. Returns timings and how it ended."""
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=minutes * 60)
            ended = "finished"
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            t_int = time.monotonic()
            try:
                proc.wait(timeout=grace_s)
                ended = "interrupted (SIGINT)"
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                ended = f"killed (no exit {grace_s:.0f} s after SIGINT)"
            return dict(
                ended=ended,
                rc=proc.returncode,
                wall_min=(time.monotonic() - t0) / 60,
                after_sigint_s=time.monotonic() - t_int,
            )
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    return dict(ended=ended, rc=proc.returncode, wall_min=(time.monotonic() - t0) / 60, after_sigint_s=0.0)


def timed_run(
    cmd: list[str], env: dict, *, cwd: Path, stdin: Path | None, log: Path, stdout: Path | None = None
) -> float:
    """Run a peer command to the end (its output to ``log``, or stdout alone to ``stdout``); seconds
    taken. Non-zero exit: PeerError."""
    t0 = time.monotonic()
    with (
        open(log, "w") as err,
        open(stdout or log, "w" if stdout else "a") as out,
        open(stdin or os.devnull, "rb") as inp,
    ):
        rc = subprocess.run(cmd, env=env, cwd=cwd, stdin=inp, stdout=out, stderr=err).returncode
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise PeerError(f"{' '.join(cmd[:4])} ... failed (exit {rc}): {' | '.join(tail)}")
    return time.monotonic() - t0


def read_lines(path: Path) -> list[str]:
    """Lines of a text file, split on "\\n" only (an empty last hypothesis stays a line)."""
    text = path.read_text(encoding="utf-8")
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def score(hyp_file: Path, ref_file: Path) -> dict:
    """Cased BLEU, lowercased BLEU and chrF by the very call attnkit's evaluate uses
    (attnkit.tasks.translation.corpus_scores: sacreBLEU 13a on detokenized text)."""
    from attnkit.tasks.translation import corpus_scores

    hyps, refs = read_lines(hyp_file), read_lines(ref_file)
    s = corpus_scores(hyps, refs, lowercase_bleu=True)
    return dict(
        bleu=round(s.bleu, 2),
        bleu_lc=round(s.bleu_lowercase, 2),
        chrf=round(s.chrf, 2),
        bleu_signature=s.bleu_signature,
        bleu_lc_signature=s.bleu_lowercase_signature,
        chrf_signature=s.chrf_signature,
        bleu_detail=s.bleu_detail,
    )
