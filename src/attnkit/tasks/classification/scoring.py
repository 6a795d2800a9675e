"""The classifier's metrics and its one evaluation: accuracy, per-class precision / recall / F1 and
their unweighted mean over the classes that occur in the gold labels or the predictions (macro-F1, as
scikit-learn computes it), a confusion matrix (rows gold, columns predicted) and its picture.

``evaluate_examples`` is what the trainer's validation and ``attnkit evaluate`` both call.

Legend: B texts in a batch, T length, C classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ...data.batching import TokenBatchSampler, pad_sequences
from ...data.readers import LabelledExample
from ...data.tokenizer import SubwordTokenizer
from ...errors import DataError
from ...loss import label_smoothed_cross_entropy
from ...precision import autocast
from .inputs import encode_inputs, example_text

NO_PAD = -1  # class ids are never negative: the token loss, given this pad id, counts every example


@dataclass(frozen=True)
class ClassScores:
    label: str
    precision: float
    recall: float
    f1: float
    support: int  # gold examples of this class


@dataclass(frozen=True)
class ClassificationReport:
    accuracy: float
    macro_f1: float
    per_class: list[ClassScores]
    confusion: Tensor  # (C, C) long: [gold, predicted]
    labels: list[str]

    def format(self) -> str:
        width = max(5, *(len(c.label) for c in self.per_class))
        lines = [
            f"accuracy  {self.accuracy:.4f}",
            f"macro-F1  {self.macro_f1:.4f}",
            f"{'class':<{width}}  precision  recall  F1      support",
        ]
        for c in self.per_class:
            lines.append(
                f"{c.label:<{width}}  {c.precision:9.4f}  {c.recall:6.4f}  {c.f1:6.4f}  {c.support:7d}"
            )
        return "\n".join(lines)


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def classification_report(
    gold: Sequence[int], predicted: Sequence[int], labels: Sequence[str]
) -> ClassificationReport:
    """Scores of class ids ``predicted`` against ``gold`` (both in range(len(labels)))."""
    gold_t = torch.as_tensor(list(gold), dtype=torch.long)
    pred_t = torch.as_tensor(list(predicted), dtype=torch.long)
    C = len(labels)
    if gold_t.numel() == 0:
        raise DataError("cannot score an empty set of examples")
    if gold_t.shape != pred_t.shape:
        raise DataError(f"{gold_t.numel()} gold labels but {pred_t.numel()} predictions")
    for name, t in (("gold", gold_t), ("predicted", pred_t)):
        if t.min() < 0 or t.max() >= C:
            raise DataError(f"{name} class ids must be in 0..{C - 1}")
    confusion = torch.bincount(gold_t * C + pred_t, minlength=C * C).view(C, C)  # (C gold, C predicted)
    tp = confusion.diag()
    per_class, f1s = [], []
    for c in range(C):
        n_pred, n_gold = int(confusion[:, c].sum()), int(confusion[c].sum())
        p, r = _ratio(int(tp[c]), n_pred), _ratio(int(tp[c]), n_gold)
        f1 = _ratio(2 * int(tp[c]), n_pred + n_gold)  # = 2PR / (P + R), 0 when undefined
        per_class.append(ClassScores(str(labels[c]), p, r, f1, n_gold))
        if n_pred or n_gold:
            f1s.append(f1)
    accuracy = int(tp.sum()) / gold_t.numel()
    return ClassificationReport(accuracy, sum(f1s) / len(f1s), per_class, confusion, [str(x) for x in labels])


def plot_confusion_matrix(
    report: ClassificationReport, out_path: str | Path, *, title: str | None = None
) -> Path:
    """Confusion matrix as a PNG: rows gold, columns predicted, each row normalized, counts written in."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    counts = report.confusion.float()
    rates = counts / counts.sum(1, keepdim=True).clamp(min=1)  # (C, C) recall per gold row
    C = len(report.labels)
    size = min(max(0.6 * C + 2.0, 4.0), 16.0)
    fig = Figure(figsize=(size + 1.0, size), layout="constrained")
    FigureCanvasAgg(fig)  # no pyplot: the caller's backend is left alone
    ax = fig.add_subplot()
    im = ax.imshow(rates.numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(C), report.labels, rotation=45, ha="right")
    ax.set_yticks(range(C), report.labels)
    ax.set(xlabel="predicted", ylabel="gold")
    ax.set_title(title or f"accuracy {report.accuracy:.3f}, macro-F1 {report.macro_f1:.3f}")
    if C <= 30:
        for g in range(C):
            for p in range(C):
                color = "white" if rates[g, p] > 0.5 else "black"
                ax.text(p, g, str(int(counts[g, p])), ha="center", va="center", fontsize=8, color=color)
    fig.colorbar(im, ax=ax, shrink=0.8, label="share of the gold row")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, format="png")
    return out


@torch.no_grad()
def evaluate_examples(
    model,
    tokenizer: SubwordTokenizer,
    labels: Sequence[str],
    examples: Sequence[LabelledExample],
    device,
    *,
    batch_tokens: int = 8000,
    amp: torch.dtype | None = None,
) -> tuple[float, ClassificationReport]:
    """(mean loss per example, the classification report) of ``model`` on labelled examples."""
    if not examples:
        raise DataError("nothing to evaluate: no labelled examples")
    index = {label: c for c, label in enumerate(labels)}
    unknown = sorted({e.label for e in examples} - set(index))
    if unknown:
        raise DataError(
            f"label(s) the model does not know: {', '.join(unknown[:5])} (known: {', '.join(labels)})"
        )
    ids = encode_inputs(tokenizer, model.config, [example_text(e) for e in examples])
    gold = torch.tensor([index[e.label] for e in examples])  # (N,)
    device = torch.device(device)
    nll, predicted = 0.0, torch.empty_like(gold)
    for idx in TokenBatchSampler([(len(s), 0) for s in ids], batch_tokens, shuffle=False):
        tokens = pad_sequences([ids[i] for i in idx], tokenizer.pad_id).to(device)  # (B, T)
        with autocast(device, amp):
            logits = model(tokens)  # (B, C)
        out = label_smoothed_cross_entropy(logits, gold[idx].to(device), epsilon=0.0, pad_id=NO_PAD)
        nll += out.nll.item()
        predicted[idx] = logits.argmax(-1).cpu()
    return nll / len(examples), classification_report(gold.tolist(), predicted.tolist(), labels)
