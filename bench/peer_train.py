"""Train a peer toolkit with its own trainer and recipe on Multi30k for a wall-clock budget, then
translate test_2016_flickr with its own translate command and score it with attnkit's sacreBLEU call.

    PYTHONPATH=src nice -n 19 python -m bench.peer_train --peer joeynmt --pair de-en --minutes 30 \\
        --threads 2 --data-dir ../shared/data --work /work/peer_runs/joeynmt_de_en_30m

Stages (the equal-budget side by side; bench/PEERS.md has the commands):
1. preparation, outside the budget: Multi30k as plain text in --work, and a joint 8,000-piece
   unigram SentencePiece model trained on the training source + target (the vocabulary size and
   kind of attnkit's configs/multi30k_de_en_best.yaml), made the way the peer makes its own;
2. the peer's config: its published small-data Transformer recipe, changing only paths,
   languages, vocabulary and what CPU needs (every change is listed in result.json);
3. the peer's own training CLI, --threads threads, stopped with Ctrl-C (SIGINT) --minutes after the
   trainer process starts (data loading included);
4. the peer's own translate command on test_2016_flickr from its best checkpoint by its own
   validation (else its last), at the recipe's beam (and greedy with --greedy), scored by
   attnkit.tasks.translation.corpus_scores: cased BLEU, lowercased BLEU, chrF;
5. --work/result.json and one markdown row on stdout.
This process runs in attnkit's environment; the peer runs in --benchenv.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import yaml

from . import peer_train_joey, peer_train_onmt
from .peer_train_common import (
    PeerError,
    check_benchenv,
    fail,
    read_lines,
    run_budgeted,
    score,
    thread_env,
    timed_run,
    write_corpus,
)
from .report import machine_info

PEERS = {"joeynmt": peer_train_joey, "opennmt": peer_train_onmt}
# Validation every N steps by default, for a few validations in 30 minutes of the peer's own recipe.
# Measured on one thread (2-core EPYC): JoeyNMT's recipe (6+6 layers, d 512, 8,192-token batches)
# takes ~40 s a step; with --recipe attnkit ~2.25 s, so pass --valid-every 200 there. OpenNMT-py's
# (4 x 4096 tokens, same model) is not measured yet; it also checkpoints at this frequency and saves
# nothing on Ctrl-C. result.json's last_step / train_wall_min tells what a probe run managed.
DEFAULT_VALID_EVERY = {"joeynmt": 8, "opennmt": 4}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.peer_train", description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True, choices=sorted(PEERS))
    ap.add_argument("--pair", default="de-en", help="SRC-TGT, e.g. de-en or en-de")
    ap.add_argument("--minutes", type=float, required=True, help="wall-clock training budget")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"), help="holds multi30k/")
    ap.add_argument("--work", type=Path, required=True, help="a new directory for this run (not in the repo)")
    ap.add_argument(
        "--benchenv", type=Path, default=Path("/work/benchenv"), help="the peers' virtual environment"
    )
    ap.add_argument(
        "--valid-every",
        type=int,
        default=None,
        help="validation (and, for OpenNMT-py, checkpoint) frequency in steps; default per peer",
    )
    ap.add_argument(
        "--checkpoint",
        choices=["best", "latest"],
        default="best",
        help="best by the peer's own validation (default; the last one if none ran), or the last",
    )
    ap.add_argument(
        "--case",
        choices=["recipe", "cased"],
        default="recipe",
        help="JoeyNMT only: keep the recipe's lowercasing (default) or train cased",
    )
    ap.add_argument(
        "--recipe",
        choices=["peer", "attnkit"],
        default="peer",
        help="the peer's own published recipe (default) or attnkit's best-recipe hyperparameters",
    )
    ap.add_argument(
        "--at-minutes",
        type=float,
        default=None,
        help="score the best checkpoint saved within this many minutes of the start (a shorter "
        "budget read off a longer run; both peers' schedules do not depend on the budget)",
    )
    ap.add_argument(
        "--score-only", action="store_true", help="skip preparation and training: score --work again"
    )
    ap.add_argument("--greedy", action="store_true", help="also translate greedily (beam 1)")
    ap.add_argument(
        "--test-sentences",
        type=int,
        default=None,
        help="translate only the first N test sentences (smoke runs only; default all 1,000)",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="plumbing check only, NOT a result: 1,000 train/200 val sentences, a tiny model and batches",
    )
    ap.add_argument("--grace", type=float, default=300.0, help="seconds to wait for the peer after Ctrl-C")
    args = ap.parse_args(argv)
    langs = args.pair.split("-")
    if len(langs) != 2 or langs[0] == langs[1] or not all(langs):
        ap.error(f"--pair must be SRC-TGT with two different languages, got {args.pair!r}")
    if (
        not args.minutes > 0
        or args.threads < 1
        or any(v is not None and v < 1 for v in (args.valid_every, args.test_sentences))
    ):
        ap.error("--minutes must be > 0; --threads, --valid-every and --test-sentences >= 1")
    args.src, args.tgt = langs
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except PeerError as err:
        fail(str(err))
    return 2


def run(args: argparse.Namespace) -> int:
    peer = PEERS[args.peer]
    python = args.benchenv / "bin" / "python"
    if not (args.data_dir / "multi30k").is_dir():
        raise PeerError(f"no Multi30k corpus: {args.data_dir / 'multi30k'} does not exist (give --data-dir)")
    check_benchenv(python, peer.MODULE)
    work = args.work.resolve()
    if args.score_only:
        prior = json.loads((work / "result.json").read_text())
        args.recipe = prior.get("recipe_choice", args.recipe)  # decode as the run was trained
        cfg = yaml.safe_load((work / "config.yaml").read_text())
        env = thread_env(args.threads, work / "site")
        changes, prep_min, valid_every = prior["changes"], prior["preparation_min"], prior["valid_every"]
        trained = {
            k: prior[k2]
            for k, k2 in (
                ("wall_min", "train_wall_min"),
                ("ended", "train_ended"),
                ("rc", "train_rc"),
                ("after_sigint_s", "seconds_after_sigint"),
            )
        }
        steps, cfg_path, args.minutes = prior["last_step"], work / "config.yaml", prior["budget_min"]
        sp_model = work / "sp.model"
    else:
        cfg, cfg_path, env, changes, prep_min, valid_every, sp_model, trained, steps = _prepare_and_train(
            args, peer, python, work
        )

    # 4. translation and scores
    started = float((work / "train_started").read_text())
    deadline = started + 60 * (args.at_minutes or args.minutes)
    ckpt, ckpt_step, why = peer.checkpoint(work, args.checkpoint, deadline)
    src_file, ref = test_files(work, args.src, args.tgt, args.test_sentences)
    n_test = len(read_lines(src_file))
    beams = [peer.beam(cfg, args.recipe)]
    beams += [1] if args.greedy and beams[0] != 1 else []
    decoded = {}
    for beam in beams:
        hyp, secs = peer.translate(python, cfg, ckpt, work, beam, env, timed_run, src_file)
        decoded[f"beam{beam}"] = dict(
            score(hyp, ref),
            seconds=round(secs, 1),
            sentences_per_s=round(n_test / secs, 2),
            hypotheses=str(hyp),
        )
        shown = {k: decoded[f"beam{beam}"][k] for k in ("bleu", "bleu_lc", "chrf", "sentences_per_s")}
        print(f"[{args.peer}] beam {beam}: {json.dumps(shown)}")

    # 5. result
    result = dict(
        peer=args.peer,
        version=peer.version(python),
        pair=args.pair,
        recipe=peer.RECIPE_SOURCE,
        recipe_settings=peer.RECIPE,
        changes=changes,
        config=str(cfg_path),
        case=args.case,
        vocabulary=(
            f"joint SentencePiece {sp_model.name}: unigram, 8000 pieces, trained on Multi30k train src+tgt"
        ),
        preparation_min=round(prep_min, 2),
        budget_min=args.minutes,
        recipe_choice=args.recipe,
        threads=args.threads,
        train_wall_min=round(trained["wall_min"], 2),
        train_ended=trained["ended"],
        train_rc=trained["rc"],
        seconds_after_sigint=round(trained["after_sigint_s"], 1),
        last_step=steps,
        checkpoint=str(ckpt),
        checkpoint_step=ckpt_step,
        checkpoint_choice=why,
        valid_every=valid_every,
        test="test_2016_flickr" if args.test_sentences is None else f"test_2016_flickr, first {n_test}",
        test_sentences=n_test,
        smoke=args.smoke,
        decoding=decoded,
        machine=f"{platform.node()}, {machine_info('cpu')['cpu']}",
        at_minutes=args.at_minutes,
    )
    name = f"result_at{args.at_minutes:g}min.json" if args.at_minutes else "result.json"
    (work / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"[{args.peer}] wrote {work / name}")
    print(markdown_row(result))
    return 0


def _prepare_and_train(args, peer, python: Path, work: Path):
    """Stages 1-3: inputs, config, training for the budget."""
    if (work / "model").exists():
        raise PeerError(f"{work} already holds a trained model: give a new --work directory")
    work.mkdir(parents=True, exist_ok=True)
    valid_every = args.valid_every or DEFAULT_VALID_EVERY[args.peer]

    # 1. preparation (not timed)
    t_prep = time.monotonic()
    files = write_corpus(args.data_dir, args.src, args.tgt, work, limit=1000 if args.smoke else None)
    if args.recipe == "attnkit":
        args.case = "cased"  # attnkit trains on cased text
    sp_model, vocab = peer.prepare(
        files,
        args.src,
        args.tgt,
        work,
        python,
        args.case,
        **({"pretokenizer": "none"} if args.recipe == "attnkit" else {}),
    )
    cfg, changes = peer.config(
        files, args.src, args.tgt, work, sp_model, vocab, case=args.case, valid_every=valid_every
    )
    if args.recipe == "attnkit":
        changes += peer.attnkit_recipe(cfg, work)
    if args.smoke:
        changes += peer.smoke(cfg)
        (work / "SMOKE").write_text("--smoke run: a plumbing check, not a result\n")
        files["valid"] = {lang: _head(path, 200) for lang, path in files["valid"].items()}
    cfg_path = work / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = thread_env(args.threads, work / "site")
    peer.before_train(python, cfg_path, work, env) if hasattr(peer, "before_train") else None
    prep_min = (time.monotonic() - t_prep) / 60
    print(
        f"[{args.peer}] prepared in {prep_min:.1f} min (outside the budget): {sp_model} "
        f"(joint unigram SentencePiece, 8,000 pieces, as configs/multi30k_de_en_best.yaml); config {cfg_path}"
    )

    # 2-3. training for the budget
    print(f"[{args.peer}] training {args.minutes:g} min, {args.threads} thread(s); log {work / 'train.log'}")
    (work / "train_started").write_text(f"{time.time()}\n")
    trained = run_budgeted(
        peer.train_cmd(python, cfg_path), env, work / "train.log", args.minutes, cwd=work, grace_s=args.grace
    )
    if trained["ended"] == "finished" and trained["rc"] != 0:
        tail = (work / "train.log").read_text(errors="replace").strip().splitlines()[-1:]
        raise PeerError(f"the {args.peer} trainer failed (exit {trained['rc']}): {' '.join(tail)}")
    steps = peer.steps_done(work)
    print(
        f"[{args.peer}] trainer {trained['ended']} after {trained['wall_min']:.2f} min "
        f"({trained['after_sigint_s']:.0f} s after Ctrl-C), last step {steps}"
    )

    return cfg, cfg_path, env, changes, prep_min, valid_every, sp_model, trained, steps


def _head(path: Path, n: int) -> Path:
    path.write_text("".join(line + "\n" for line in read_lines(path)[:n]), encoding="utf-8")
    return path


def test_files(work: Path, src: str, tgt: str, n: int | None) -> tuple[Path, Path]:
    """(source, reference) of test_2016_flickr, or of its first ``n`` sentences."""
    if n is None:
        return work / f"test.{src}", work / f"test.{tgt}"
    out = []
    for lang in (src, tgt):
        sub = work / f"test_first{n}.{lang}"
        sub.write_text(
            "".join(line + "\n" for line in read_lines(work / f"test.{lang}")[:n]), encoding="utf-8"
        )
        out.append(sub)
    return out[0], out[1]


def markdown_row(r: dict) -> str:
    """| peer | pair | budget | threads | steps (ckpt) | beam | BLEU | BLEU lc | chrF | sent/s |"""
    cells = []
    for beam, d in r["decoding"].items():
        cells.append(
            f"| {r['peer']} {r['version']} | {r['pair']} | {r['budget_min']:g} min | {r['threads']} | "
            f"{r['last_step']} (ckpt {r['checkpoint_step']}) | {beam} | {d['bleu']:.2f} | "
            f"{d['bleu_lc']:.2f} | {d['chrf']:.2f} | {d['sentences_per_s']:.1f} |"
        )
    return "\n".join(cells)


if __name__ == "__main__":
    raise SystemExit(main())
