"""JoeyNMT 2.3 for bench.peer_train: its own small-data Transformer recipe, its trainer, its translate.

The recipe is JoeyNMT's ``configs/iwslt14_deen_sp.yaml`` (IWSLT14 de-en, ~160k sentence pairs,
SentencePiece), as published in the joeynmt/joeynmt repository for 2.x. RECIPE holds its settings
as they are; ``config()`` changes only paths, languages, the vocabulary and what CPU needs, and
returns every change with its reason.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import yaml

from .peer_train_common import SP_VOCAB_SIZE, PeerError, read_lines, train_sentencepiece

NAME = "joeynmt"
MODULE = "joeynmt"
RECIPE_SOURCE = "joeynmt/joeynmt configs/iwslt14_deen_sp.yaml (commit 1890439, joeynmt 2.x)"

_TOK = dict(model_type="unigram", character_coverage=1.0, alpha=0.1, pretokenizer="moses")
_SIDE = dict(
    max_length=512,
    lowercase=True,
    normalize=False,
    level="bpe",
    voc_limit=32000,
    voc_min_freq=1,
    tokenizer_type="sentencepiece",
)
_STACK = dict(
    type="transformer",
    num_layers=6,
    num_heads=8,
    embeddings=dict(embedding_dim=512, scale=True, dropout=0.0),
    hidden_size=512,
    ff_size=2048,
    dropout=0.1,
    layer_norm="pre",
    activation="relu",
)
RECIPE = {
    "data": {
        "src": dict(_SIDE, lang="de", tokenizer_cfg=dict(_TOK)),
        "trg": dict(_SIDE, lang="en", tokenizer_cfg=dict(_TOK)),
    },
    "testing": dict(
        n_best=1,
        beam_size=5,
        beam_alpha=1.0,
        batch_size=1024,
        batch_type="token",
        max_output_length=100,
        eval_metrics=["bleu"],
        sacrebleu_cfg=dict(tokenize="13a", lowercase=True),
    ),
    "training": dict(
        random_seed=42,
        optimizer="adam",
        normalization="tokens",
        adam_betas=[0.9, 0.999],
        scheduling="warmupinversesquareroot",
        learning_rate_warmup=4000,
        learning_rate=0.0002,
        learning_rate_min=1.0e-8,
        weight_decay=0.0,
        label_smoothing=0.1,
        loss="crossentropy",
        batch_size=8192,
        batch_type="token",
        batch_multiplier=1,
        early_stopping_metric="bleu",
        epochs=100,
        validation_freq=1000,
        logging_freq=100,
        overwrite=False,
        shuffle=True,
        use_cuda=True,
        fp16=True,
        print_valid_sents=[0, 1, 2, 3],
        keep_best_ckpts=5,
    ),
    "model": dict(
        initializer="xavier_uniform",
        bias_initializer="zeros",
        init_gain=1.0,
        embed_initializer="xavier_uniform",
        embed_init_gain=1.0,
        tied_embeddings=True,
        tied_softmax=True,
        encoder=dict(_STACK),
        decoder=dict(_STACK),
    ),
}
SPECIALS = dict(
    unk_id=0,
    pad_id=1,
    bos_id=2,
    eos_id=3,
    unk_piece="<unk>",
    pad_piece="<pad>",
    bos_piece="<s>",
    eos_piece="</s>",
)  # JoeyNMT's fixed special ids, as its scripts/build_vocab.py trains them

_PREPROCESS = """
import sys
from joeynmt.tokenizers import BasicTokenizer
lang, lowercase, src, dst, pretok = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], sys.argv[5]
tok = BasicTokenizer(level="bpe", lowercase=lowercase, normalize=False, pretokenizer=pretok, lang=lang)
with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as g:
    for line in f:
        g.write(tok.pre_process(line.rstrip("\\n")) + "\\n")
"""


def prepare(
    files: dict, src: str, tgt: str, work: Path, python: Path, case: str, pretokenizer: str = "moses"
) -> tuple[Path, Path]:
    """The joint 8k SentencePiece model, trained (as JoeyNMT's build_vocab does) on the training text
    after JoeyNMT's own pre-processing (Moses tokenization, + lowercasing when the recipe's);
    and JoeyNMT's vocabulary file (one piece per line, in id order). Returns (model, vocab)."""
    lowercase = case == "recipe"
    lines: list[str] = []
    for lang in (src, tgt):
        pre = work / f"train.pre.{lang}"
        if not pre.is_file():
            res = subprocess.run(
                [
                    str(python),
                    "-c",
                    _PREPROCESS,
                    lang,
                    "1" if lowercase else "0",
                    str(files["train"][lang]),
                    str(pre),
                    pretokenizer,
                ],
                capture_output=True,
                text=True,
            )
            if res.returncode != 0:
                raise PeerError(
                    f"JoeyNMT pre-processing failed: {(res.stderr.strip().splitlines() or ['?'])[-1]}"
                )
        lines += read_lines(pre)
    model = train_sentencepiece(lines, work / "sp", specials=SPECIALS)
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    vocab = work / "sp.vocab.txt"
    vocab.write_text("".join(sp.id_to_piece(i) + "\n" for i in range(sp.get_piece_size())), encoding="utf-8")
    return model, vocab


def config(
    files: dict, src: str, tgt: str, work: Path, sp_model: Path, vocab: Path, *, case: str, valid_every: int
) -> tuple[dict, list[str]]:
    """(JoeyNMT config, the list of changes from RECIPE with reasons)."""
    cfg = copy.deepcopy(RECIPE)
    log_every = max(d for d in range(1, 11) if valid_every % d == 0)
    changes = [
        "data: train/dev/test = Multi30k train / val / test_2016_flickr as plain text files "
        "(dataset_type plain) instead of the Hugging Face iwslt14 dataset (paths)",
        f"data.src.lang/trg.lang = {src}/{tgt} (languages)",
        f"voc_file, tokenizer_cfg.model_file = a joint {SP_VOCAB_SIZE}-piece unigram SentencePiece model "
        "trained on Multi30k train (src+tgt) after JoeyNMT's pre-processing, as its "
        "scripts/build_vocab.py does (vocabulary; the recipe's model has 32k-limit iwslt14 pieces)",
        "training.use_cuda False, fp16 False (CPU)",
        f"training.validation_freq {valid_every} "
        "(recipe 1000: chosen so it validates a few times in the budget)",
        f"training.logging_freq {log_every} (recipe 100; JoeyNMT requires it to divide validation_freq)",
        "training.model_dir = the work dir (paths)",
        "training.keep_best_ckpts -1 (recipe 5): keep every validation's checkpoint, so that the best one "
        "saved before a deadline can be chosen (a shorter budget read off a longer run)",
    ]
    for side, lang in (("src", src), ("trg", tgt)):
        d = cfg["data"][side]
        d["lang"] = lang
        d["voc_file"] = str(vocab)
        d["tokenizer_cfg"]["model_file"] = str(sp_model)
        if case == "cased":
            d["lowercase"] = False
    if case == "cased":
        changes.append(
            "data.*.lowercase False (--case cased: the recipe lowercases; this keeps case for cased BLEU)"
        )
    cfg["data"].update(
        train=str(work / "train"), dev=str(work / "valid"), test=str(work / "test"), dataset_type="plain"
    )
    cfg["name"] = f"multi30k_{src}{tgt}_iwslt14_deen_sp_recipe"
    cfg["joeynmt_version"] = "2.0.0"  # the recipe's own line
    t = cfg["training"]
    t.update(
        use_cuda=False,
        fp16=False,
        validation_freq=valid_every,
        logging_freq=log_every,
        keep_best_ckpts=-1,
        model_dir=str(work / "model"),
    )
    return cfg, changes


# attnkit's configs/multi30k_<pair>_best.yaml in JoeyNMT's terms (--recipe attnkit): the same model,
# batches, optimizer and schedule, so that only the two implementations and trainers differ.
ATTNKIT_RECIPE = {
    "stack": dict(num_layers=3, num_heads=4, hidden_size=256, ff_size=1024, dropout=0.3, layer_norm="post"),
    "embedding": dict(embedding_dim=256, scale=True, dropout=0.3),
    "training": dict(
        learning_rate=0.001,
        learning_rate_warmup=1000,
        batch_size=4096,
        adam_betas=[0.9, 0.98],
        clip_grad_norm=1.0,
        label_smoothing=0.1,
        scheduling="warmupinversesquareroot",
    ),
    "testing": dict(beam_size=4, beam_alpha=0.6),
}


def attnkit_recipe(cfg: dict, work: Path) -> list[str]:
    """--recipe attnkit: attnkit's best-recipe hyperparameters (cased text, no Moses pre-tokenization,
    no subword sampling, as attnkit trains), in place of JoeyNMT's IWSLT14 ones."""
    for side in ("encoder", "decoder"):
        cfg["model"][side].update(ATTNKIT_RECIPE["stack"])
        cfg["model"][side]["embeddings"].update(ATTNKIT_RECIPE["embedding"])
    cfg["training"].update(ATTNKIT_RECIPE["training"])
    cfg["testing"].update(ATTNKIT_RECIPE["testing"])
    cfg["testing"]["sacrebleu_cfg"]["lowercase"] = False  # its validation BLEU cased, as attnkit's
    for side in ("src", "trg"):
        cfg["data"][side]["lowercase"] = False
        cfg["data"][side]["tokenizer_cfg"].update(pretokenizer="none", alpha=0.0)
    cfg["name"] = cfg["name"].replace("iwslt14_deen_sp_recipe", "attnkit_best_recipe")
    return [
        "--recipe attnkit (NOT JoeyNMT's recipe): attnkit's configs/multi30k_*_best.yaml hyperparameters: "
        f"{json.dumps(ATTNKIT_RECIPE)}; cased text, no Moses pre-tokenization, no subword sampling"
    ]


def smoke(cfg: dict) -> list[str]:
    """--smoke: a model and batches small enough to run every stage in minutes on a busy CPU."""
    for side in ("encoder", "decoder"):
        cfg["model"][side].update(num_layers=1, num_heads=2, hidden_size=64, ff_size=128)
        cfg["model"][side]["embeddings"]["embedding_dim"] = 64
    cfg["training"].update(batch_size=512)
    cfg["testing"].update(max_output_length=30)
    return [
        "SMOKE (not the recipe): 1+1 layers, d 64, 2 heads, FFN 128, 512-token batches, "
        "max_output_length 30, 1,000 train / 200 val sentences"
    ]


def train_cmd(python: Path, cfg_path: Path) -> list[str]:
    # --skip-test: JoeyNMT would otherwise decode dev and test with best.ckpt right after training
    # (inside the budget, and it fails when no validation has run yet); we test on our own below.
    return [str(python), "-m", "joeynmt", "train", str(cfg_path), "--skip-test"]


# The checkpoint JoeyNMT writes on Ctrl-C at the deadline lands a second or two after it.
DEADLINE_SLACK_S = 30.0


def checkpoint(work: Path, which: str, deadline: float | None = None) -> tuple[Path, int, str]:
    """(checkpoint file, its step, how it was chosen) among the checkpoints written before ``deadline``
    (a time.time() value; None: any): the best by JoeyNMT's own validation BLEU (validations.txt), or
    the newest (``which='latest'``, or when no validation ran in time)."""
    model_dir = work / "model"
    saved = {
        int(p.stem): p
        for p in model_dir.glob("*.ckpt")
        if p.stem.isdigit()
        and not p.is_symlink()
        and (deadline is None or p.stat().st_mtime <= deadline + DEADLINE_SLACK_S)
    }
    if not saved:
        raise PeerError(f"JoeyNMT saved no checkpoint in {model_dir} in time (see {work / 'train.log'})")
    bleu = {}
    report = model_dir / "validations.txt"
    for line in report.read_text().splitlines() if report.is_file() else []:
        fields = dict(f.split(": ", 1) for f in line.split("\t") if ": " in f)
        if "Steps" in fields and "bleu" in fields and int(fields["Steps"]) in saved:
            bleu[int(fields["Steps"])] = float(fields["bleu"])
    if which == "best" and bleu:
        step = max(bleu, key=lambda s: (bleu[s], s))
        return (
            saved[step],
            step,
            f"best validation BLEU {bleu[step]:.2f} (JoeyNMT's validations.txt) saved in time",
        )
    step = max(saved)
    return (
        saved[step],
        step,
        "the newest checkpoint saved in time" + ("" if which == "latest" else ": no validation"),
    )


def steps_done(work: Path) -> int | None:
    """The last step JoeyNMT reached (from its 'Interrupt at epoch e, step s.' or newest checkpoint)."""
    ckpts = [int(p.stem) for p in (work / "model").glob("*.ckpt") if p.stem.isdigit()]
    return max(ckpts) if ckpts else None


def beam(cfg: dict, recipe: str) -> int:
    """The beam the run decodes with: its config's testing beam (attnkit_recipe sets attnkit's 4)."""
    return cfg["testing"]["beam_size"]


def translate(
    python: Path, cfg: dict, ckpt: Path, work: Path, beam: int, env: dict, run, src_file: Path
) -> tuple[Path, float]:
    """Translate ``src_file`` with JoeyNMT's own ``translate`` mode (stdin -> detokenized lines) from
    ``ckpt`` at beam ``beam`` (1 = greedy); returns (hypothesis file, seconds)."""
    cfg = copy.deepcopy(cfg)
    cfg["testing"].update(load_model=str(ckpt), beam_size=beam)
    cfg_path = work / f"translate_beam{beam}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = work / f"test.hyp.beam{beam}"
    # Hypotheses from stdout: JoeyNMT 2.3's `translate -o FILE` crashes (AttributeError: 'BaseConfig'
    # object has no attribute 'n_best', prediction.py:630); its log goes to stderr.
    secs = run(
        [str(python), "-m", "joeynmt", "translate", str(cfg_path)],
        env,
        cwd=work,
        stdin=src_file,
        log=work / f"translate_beam{beam}.log",
        stdout=out,
    )
    return out, secs


def version(python: Path) -> str:
    res = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, json; print(json.dumps(m.version('joeynmt')))"],
        capture_output=True,
        text=True,
    )
    return json.loads(res.stdout) if res.returncode == 0 else "?"
