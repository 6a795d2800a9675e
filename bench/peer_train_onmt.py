"""OpenNMT-py 3.5 for bench.peer_train: its documented Transformer recipe, its trainer, its translate.

OpenNMT-py publishes no small-data Transformer recipe; its documentation's Transformer recipe is the
FAQ's "How do I use the Transformer model?" configuration (docs/source/FAQ.md, 3.x: the Google
base setup that "can replicate their WMT results", written for 4 GPUs). RECIPE holds its settings as
they are; ``config()`` changes only paths, the vocabulary and what one CPU process needs, and returns
every change with its reason. Text goes through OpenNMT-py's own ``sentencepiece`` transform
(training and translation, which also detokenizes), and its vocabulary is built by its own
``onmt_build_vocab``.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import yaml

from .peer_train_common import SP_VOCAB_SIZE, PeerError, read_lines, timed_run, train_sentencepiece

NAME = "opennmt"
MODULE = "onmt"
RECIPE_SOURCE = "OpenNMT/OpenNMT-py docs/source/FAQ.md, 'How do I use the Transformer model?' (3.x)"
RECIPE_BEAM = 5  # onmt_translate's default beam_size; the recipe names none
RECIPE = dict(
    save_checkpoint_steps=10000,
    valid_steps=10000,
    train_steps=200000,
    bucket_size=32768,
    world_size=4,
    gpu_ranks=[0, 1, 2, 3],
    num_workers=4,
    batch_type="tokens",
    batch_size=4096,
    valid_batch_size=8,
    max_generator_batches=2,
    accum_count=[4],
    accum_steps=[0],
    model_dtype="fp32",
    optim="adam",
    learning_rate=2,
    warmup_steps=8000,
    decay_method="noam",
    adam_beta2=0.998,
    max_grad_norm=0,
    label_smoothing=0.1,
    param_init=0,
    param_init_glorot=True,
    normalization="tokens",
    encoder_type="transformer",
    decoder_type="transformer",
    position_encoding=True,
    enc_layers=6,
    dec_layers=6,
    heads=8,
    hidden_size=512,
    word_vec_size=512,
    transformer_ff=2048,
    dropout_steps=[0],
    dropout=[0.1],
    attention_dropout=[0.1],
)


def prepare(
    files: dict, src: str, tgt: str, work: Path, python: Path, case: str, pretokenizer: str = "none"
) -> tuple[Path, Path]:
    """The joint 8k unigram SentencePiece model on the raw training text (source + target), as
    OpenNMT-py's sentencepiece transform expects (it tokenizes raw text, with no pre-tokenizer:
    ``pretokenizer`` must be "none"); returns (model, vocab path that ``before_train`` fills with
    onmt_build_vocab)."""
    if case not in ("recipe", "cased") or pretokenizer != "none":
        raise PeerError(
            "--case applies to JoeyNMT only (OpenNMT-py's recipe keeps case, with no pre-tokenizer)"
        )
    lines = read_lines(files["train"][src]) + read_lines(files["train"][tgt])
    return train_sentencepiece(lines, work / "sp"), work / "onmt.vocab"


def config(
    files: dict, src: str, tgt: str, work: Path, sp_model: Path, vocab: Path, *, case: str, valid_every: int
) -> tuple[dict, list[str]]:
    """(OpenNMT-py train config, the list of changes from RECIPE with reasons)."""
    cfg = copy.deepcopy(RECIPE)
    changes = [
        "data: corpus_1 = Multi30k train, valid = Multi30k val, transforms [sentencepiece, filtertoolong] "
        "on train and [sentencepiece] on valid (the recipe leaves the data configuration to the user)",
        f"src/tgt_subword_model = a joint {SP_VOCAB_SIZE}-piece unigram SentencePiece model on Multi30k "
        "train src+tgt; share_vocab true, src_vocab from onmt_build_vocab -n_sample -1 (vocabulary)",
        "world_size 1, gpu_ranks [] (one CPU process; the recipe's 4 GPUs each took 4096-token batches x "
        "accum_count 4, so its effective batch is 4x ours)",
        "num_workers 0 (the recipe's 4 DataLoader worker processes would take CPU beyond --threads)",
        f"valid_steps {valid_every} (recipe 10000: a few validations in the budget; it reports ppl/acc only)",
        f"save_checkpoint_steps {valid_every} (recipe 10000: OpenNMT-py saves nothing on Ctrl-C, so only "
        "checkpoints saved before the deadline count)",
        "keep_checkpoint 3, save_model/save_data/log_file = the work dir (paths)",
        "report_every 1 (progress of every step in the log, to count steps; logging only)",
    ]
    cfg.update(
        world_size=1,
        gpu_ranks=[],
        num_workers=0,
        valid_steps=valid_every,
        save_checkpoint_steps=valid_every,
        keep_checkpoint=3,
        report_every=1,
        seed=3435,
    )
    changes.append("seed 3435 (OpenNMT-py's config-transformer-base-1GPU.yml seed; the FAQ names none)")
    data = dict(
        corpus_1=dict(
            path_src=str(files["train"][src]),
            path_tgt=str(files["train"][tgt]),
            transforms=["sentencepiece", "filtertoolong"],
        ),
        valid=dict(
            path_src=str(files["valid"][src]), path_tgt=str(files["valid"][tgt]), transforms=["sentencepiece"]
        ),
    )
    cfg = dict(
        save_data=str(work / "onmt_data"),
        src_vocab=str(vocab),
        share_vocab=True,
        src_subword_model=str(sp_model),
        tgt_subword_model=str(sp_model),
        data=data,
        save_model=str(work / "model" / "model"),
        log_file=str(work / "onmt_train.log"),
        **cfg,
    )
    return cfg, changes


# attnkit's configs/multi30k_<pair>_best.yaml in OpenNMT-py's terms (--recipe attnkit). Its noam
# schedule, lr * d^-0.5 * min(step^-0.5, step * warmup^-1.5), equals attnkit's linear warmup to 1e-3
# at step 1,000 and inverse-square-root decay when lr = 1e-3 * sqrt(256) * sqrt(1000).
ATTNKIT_RECIPE = dict(
    enc_layers=3,
    dec_layers=3,
    heads=4,
    hidden_size=256,
    word_vec_size=256,
    transformer_ff=1024,
    dropout=[0.3],
    attention_dropout=[0.1],
    add_qkvbias=True,
    add_ffnbias=True,
    share_embeddings=True,
    share_decoder_embeddings=True,
    optim="adam",
    adam_beta1=0.9,
    adam_beta2=0.98,
    decay_method="noam",
    warmup_steps=1000,
    learning_rate=round(1e-3 * 256**0.5 * 1000**0.5, 5),
    max_grad_norm=1.0,
    label_smoothing=0.1,
    batch_type="tokens",
    batch_size=4096,
    accum_count=[1],
    valid_batch_size=4096,
)
ATTNKIT_DECODING = dict(beam_size=4, length_penalty="wu", alpha=0.6)  # GNMT's penalty, as attnkit's


def attnkit_recipe(cfg: dict, work: Path) -> list[str]:
    """--recipe attnkit: attnkit's best-recipe hyperparameters in place of the FAQ's base setup."""
    cfg.update(copy.deepcopy(ATTNKIT_RECIPE))
    (work / "RECIPE_ATTNKIT").write_text(json.dumps(ATTNKIT_DECODING) + "\n")  # read by translate()
    return [
        "--recipe attnkit (NOT OpenNMT-py's recipe): attnkit's configs/multi30k_*_best.yaml hyperparameters: "
        f"{json.dumps(ATTNKIT_RECIPE)}; decoding {json.dumps(ATTNKIT_DECODING)}. Differences that remain: "
        "OpenNMT-py 3.5's Transformer is pre-norm only (attnkit's recipe is post-norm), LayerNorm eps 1e-6, "
        "its token batches count padded max(src, tgt) lengths"
    ]


def smoke(cfg: dict) -> list[str]:
    """--smoke: a model and batches small enough to run every stage in minutes on a busy CPU."""
    cfg.update(
        enc_layers=1,
        dec_layers=1,
        heads=2,
        hidden_size=64,
        word_vec_size=64,
        transformer_ff=128,
        batch_size=512,
        accum_count=[1],
        valid_batch_size=8,
    )
    return [
        "SMOKE (not the recipe): 1+1 layers, d 64, 2 heads, FFN 128, 512-token batches, accum_count 1, "
        "1,000 train / 200 val sentences"
    ]


def before_train(python: Path, cfg_path: Path, work: Path, env: dict) -> None:
    """OpenNMT-py's own vocabulary step (outside the budget): onmt_build_vocab on all of train."""
    if not (work / "onmt.vocab").is_file():
        timed_run(
            [str(python), "-m", "onmt.bin.build_vocab", "-config", str(cfg_path), "-n_sample", "-1"],
            env,
            cwd=work,
            stdin=None,
            log=work / "build_vocab.log",
        )


def train_cmd(python: Path, cfg_path: Path) -> list[str]:
    return [str(python), "-m", "onmt.bin.train", "-config", str(cfg_path)]


def _saved(work: Path) -> list[tuple[int, Path]]:
    out = []
    for p in (work / "model").glob("model_step_*.pt"):
        m = re.fullmatch(r"model_step_(\d+)\.pt", p.name)
        if m:
            out.append((int(m.group(1)), p))
    return sorted(out)


def checkpoint(work: Path, which: str, deadline: float | None = None) -> tuple[Path, int, str]:
    """OpenNMT-py keeps no best checkpoint (its validation reports perplexity and accuracy only):
    the last one it saved before the deadline (a time.time() value; None: any)."""
    saved = [(s, p) for s, p in _saved(work) if deadline is None or p.stat().st_mtime <= deadline]
    if not saved:
        raise PeerError(
            f"OpenNMT-py saved no checkpoint before the deadline in {work / 'model'} "
            "(lower --valid-every; see train.log)"
        )
    step, path = saved[-1]
    return (
        path,
        step,
        "last saved before the deadline (OpenNMT-py keeps no best checkpoint; saves nothing on Ctrl-C)",
    )


def steps_done(work: Path) -> int | None:
    """The last step OpenNMT-py reported (report_every 1)."""
    log = work / "train.log"
    steps = re.findall(r"Step (\d+)/", log.read_text(errors="replace")) if log.is_file() else []
    return int(steps[-1]) if steps else None


def beam(cfg: dict, recipe: str) -> int:
    """The beam the run decodes with: its recipe's (attnkit's 4, or onmt_translate's default 5)."""
    return ATTNKIT_DECODING["beam_size"] if recipe == "attnkit" else RECIPE_BEAM


def translate(
    python: Path, cfg: dict, ckpt: Path, work: Path, beam: int, env: dict, run, src_file: Path
) -> tuple[Path, float]:
    """onmt_translate with the sentencepiece transform (tokenizes the source, detokenizes the output)."""
    out = work / f"test.hyp.beam{beam}"
    tcfg = dict(
        model=str(ckpt),
        src=str(src_file),
        output=str(out),
        beam_size=beam,
        gpu=-1,
        transforms=["sentencepiece"],
        src_subword_model=cfg["src_subword_model"],
        tgt_subword_model=cfg["tgt_subword_model"],
    )  # onmt_translate defaults otherwise
    if (work / "SMOKE").exists():
        tcfg["max_length"] = 30
    if (work / "RECIPE_ATTNKIT").exists():  # --recipe attnkit: its length penalty (the beam is given)
        tcfg.update(
            {k: v for k, v in json.loads((work / "RECIPE_ATTNKIT").read_text()).items() if k != "beam_size"}
        )
    cfg_path = work / f"translate_beam{beam}.yaml"
    cfg_path.write_text(yaml.safe_dump(tcfg, sort_keys=False))
    secs = run(
        [str(python), "-m", "onmt.bin.translate", "-config", str(cfg_path)],
        env,
        cwd=work,
        stdin=None,
        log=work / f"translate_beam{beam}.log",
    )
    return out, secs


def version(python: Path) -> str:
    res = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, json; print(json.dumps(m.version('OpenNMT-py')))",
        ],
        capture_output=True,
        text=True,
    )
    return json.loads(res.stdout) if res.returncode == 0 else "?"
