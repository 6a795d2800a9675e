"""TER and several references beside BLEU and chrF, and ``valid.metric``: which metric picks the best
checkpoint (lower is better for TER and loss), among the metrics of the model's own task."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import sacrebleu

from attnkit.checkpoint import load_checkpoint
from attnkit.errors import ConfigError, DataError
from attnkit.tasks.classification import ClassifierTask
from attnkit.tasks.language_model import LanguageModelTask
from attnkit.tasks.translation import Evaluation, Scores, TranslationTask, corpus_scores
from attnkit.train import load_config, train
from attnkit.train.metrics_csv import append_row
from cli_helpers import assert_user_error, cli, write_config

REFS = [
    "The cat sat on the mat.",
    "A man is riding a bicycle down the street.",
    "Two dogs are playing in the snow.",
]
REFS_2 = ["A cat sits on a mat.", "A man rides a bike on the road.", "Two dogs play in snow."]
HYPS = ["The cat sat on a mat.", "A man rides a bike down the street.", "Two dogs play in snow."]

# -- scores ------------------------------------------------------------------------------------------


def test_ter_is_sacrebleus_corpus_ter():
    s = corpus_scores(HYPS, REFS)
    assert s.ter == pytest.approx(sacrebleu.corpus_ter(HYPS, [REFS]).score) and 0 < s.ter < 100
    assert "nrefs:1" in s.ter_signature and "tok:tercom" in s.ter_signature
    (line,) = [x for x in s.format().splitlines() if x.startswith("TER")]
    assert f"{s.ter:6.2f}" in line and s.ter_signature in line
    assert corpus_scores(HYPS, REFS, ter=False).ter is None


def test_several_references_score_as_sacrebleus_multi_reference_corpus_scores():
    s = corpus_scores(HYPS, REFS, REFS_2)
    assert s.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, REFS_2]).score)
    assert s.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS, REFS_2]).score)
    assert s.ter == pytest.approx(sacrebleu.corpus_ter(HYPS, [REFS, REFS_2]).score)
    assert s.bleu > corpus_scores(HYPS, REFS).bleu  # the second reference counts
    assert "nrefs:2" in s.bleu_signature and "nrefs:2" in s.ter_signature
    with pytest.raises(DataError, match="3 hypotheses but 2 references"):
        corpus_scores(HYPS, REFS, REFS_2[:2])


# -- valid.metric: the task's own choices ---------------------------------------------------------


def config(*overrides: str):
    return load_config(None, ["model.preset=tiny", *overrides])


def test_valid_metric_chooses_among_the_tasks_own_metrics():
    default = TranslationTask(config())
    assert (default.metric, default.higher_is_better, default.metrics) == ("bleu", True, ("loss", "bleu"))
    ter = TranslationTask(config("valid.metric=TER"))  # as papers spell it
    assert (ter.metric, ter.higher_is_better, ter.metrics) == ("ter", False, ("loss", "bleu", "ter"))
    assert TranslationTask(config("valid.metric=chrf")).higher_is_better
    loss = LanguageModelTask(config("model.arch=lm", "valid.metric=loss"))
    assert (loss.metric, loss.higher_is_better, loss.metrics) == ("loss", False, ("loss", "perplexity"))
    accuracy = ClassifierTask(config("model.arch=classifier", "valid.metric=accuracy"))
    assert accuracy.metric == "accuracy" and accuracy.higher_is_better
    assert ClassifierTask().metric == "macro_f1"  # no config: the task's default


@pytest.mark.parametrize(
    "arch, metric, choices",
    [("lm", "ter", "perplexity, loss"), ("classifier", "bleu", "macro_f1, accuracy, loss")],
)
def test_a_metric_of_another_task_is_a_config_error(arch, metric, choices):
    task = {"lm": LanguageModelTask, "classifier": ClassifierTask}[arch]
    with pytest.raises(ConfigError, match=f"valid.metric = '{metric}': must be one of {choices}"):
        task(config(f"model.arch={arch}", f"valid.metric={metric}"))


def test_train_refuses_an_unknown_metric_in_one_line(capsys, tmp_path):
    out = tmp_path / "out"
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", out, "valid.metric=comet"
    )
    assert_user_error(*result[::2], "valid.metric = 'comet'", "bleu, chrf, ter, loss")
    assert not out.exists()


# -- the trainer keeps the best checkpoint by valid.metric ------------------------------------------

TINY = [
    "data.max_train_pairs=100",
    "data.max_valid_pairs=5",
    "tokenizer.vocab_size=100",
    "train.max_tokens=400",
    "train.schedule=inverse_sqrt",
    "train.lr=0.003",
    "train.warmup_steps=2",
    "train.progress=false",
    "valid.every=1",
    "valid.keep_last=1",
]


def scripted(monkeypatch, *, bleu=(), ter=(), loss=()):
    """Each validation reports the next of these values (the real one where none is given)."""
    from attnkit.tasks.translation import training

    bleus, ters, losses = iter(bleu), iter(ter), iter(loss)
    real_loss = training.mean_loss

    def evaluate(translator, sources, *references, ter: bool, **options):
        scores = Scores(next(bleus, 0.0), 0.0, "", "", "", ter=next(ters) if ter else None)
        return Evaluation(scores, [])

    monkeypatch.setattr(training, "evaluate", evaluate)
    monkeypatch.setattr(training, "mean_loss", lambda *a, **k: next(losses, None) or real_loss(*a, **k))


def run(shared_data, out: Path, *overrides: str, resume=None):
    cfg = load_config(
        None, [f"data.data_dir={shared_data}", "model.preset=tiny", *TINY, f"output_dir={out}", *overrides]
    )
    result = train(cfg, resume=resume, log=lambda m: None)
    return result, load_checkpoint(result.best_checkpoint)["step"]


def validations(path: Path, column: str) -> list[float | None]:
    with path.open() as f:
        return [float(r[column]) if r[column] else None for r in csv.DictReader(f) if r["val_loss"]]


def test_valid_metric_ter_keeps_the_checkpoint_with_the_lowest_ter(monkeypatch, shared_data, tmp_path):
    scripted(monkeypatch, bleu=[10, 5, 20], ter=[50, 30, 40])  # BLEU would pick step 3
    result, best = run(shared_data, tmp_path, "train.max_steps=3", "valid.metric=ter")
    assert (result.metric, result.best_score, best) == ("ter", 30, 2)
    assert validations(result.metrics_csv, "val_ter") == [50, 30, 40]


def test_valid_metric_loss_then_resumed_with_ter(monkeypatch, shared_data, tmp_path):
    """A resumed run may validate by another metric: its best starts afresh, the CSV gains the column."""
    scripted(monkeypatch, bleu=[20, 10, 0, 0], loss=[3.0, 2.0], ter=[50, 60])  # BLEU would pick step 1
    result, best = run(shared_data, tmp_path, "train.max_steps=2", "valid.metric=loss")
    assert (result.metric, result.best_score, best) == ("loss", 2.0, 2)
    last = tmp_path / "checkpoint_last.pt"
    result, best = run(shared_data, tmp_path, "train.max_steps=4", "valid.metric=ter", resume=last)
    assert (result.metric, result.best_score, best) == ("ter", 50, 3)  # 50 is no better than a loss of 2
    assert validations(result.metrics_csv, "val_ter") == [None, None, 50, 60]


def test_a_new_metric_column_rewrites_the_csv_header(tmp_path):
    path = tmp_path / "metrics.csv"
    append_row(path, ("loss", "bleu"), {"step": 1, "val_loss": 2.0, "val_bleu": 3.0})
    append_row(path, ("loss", "bleu", "ter"), {"step": 2, "val_loss": 1.0, "val_bleu": 4.0, "val_ter": 9.0})
    append_row(path, ("loss", "bleu"), {"step": 3, "val_loss": 0.5, "val_bleu": 5.0})
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["val_bleu"], r["val_ter"]) for r in rows] == [("3.0", ""), ("4.0", "9.0"), ("5.0", "")]


# -- attnkit evaluate --ref A B ---------------------------------------------------------------------


def printed(out: str, name: str) -> float:
    match = re.search(rf"^{name}\s+([0-9.]+)", out, flags=re.M)
    assert match, out
    return float(match.group(1))


def test_evaluate_scores_against_several_reference_files(capsys, runs, tmp_path):
    hyp = tmp_path / "hyp.en"
    base = ["evaluate", "--checkpoint", runs.ckpt, "--src", runs.eval_src, "--beam", "1", "--device", "cpu"]
    code, one, err = cli(capsys, *base, "--ref", runs.eval_ref, "--hyp-output", hyp)
    assert code == 0, err
    hyps, refs = (p.read_text(encoding="utf-8").splitlines() for p in (hyp, runs.eval_ref))
    assert printed(one, "TER") == pytest.approx(sacrebleu.corpus_ter(hyps, [refs]).score, abs=6e-3)

    code, two, err = cli(capsys, *base, "--ref", runs.eval_ref, hyp)  # the output itself: a perfect reference
    assert code == 0, err
    assert two.splitlines()[0].startswith(f"{runs.eval_src} -> {runs.eval_ref}, {hyp}, ")
    assert printed(two, "BLEU") == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs, hyps]).score, abs=6e-3)
    assert printed(two, "BLEU") > printed(one, "BLEU") and printed(two, "TER") == 0
    assert "nrefs:2" in two


def test_evaluate_refuses_a_reference_file_of_another_length(capsys, runs, tmp_path):
    short = tmp_path / "short.en"
    short.write_text(
        "".join(runs.eval_ref.read_text(encoding="utf-8").splitlines(True)[:-1]), encoding="utf-8"
    )
    result = cli(
        capsys, "evaluate", "--checkpoint", runs.ckpt, "--src", runs.eval_src, "--ref", runs.eval_ref, short
    )
    assert_user_error(*result[::2], "line counts differ", str(short), str(runs.eval_src))
