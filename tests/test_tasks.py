"""The LM and classifier tasks: batches, losses against their definitions, and learning in seconds."""

import math
from types import SimpleNamespace

import pytest
import torch

from attnkit.data.encoded import Encoded
from attnkit.data.readers import LabelledExample
from attnkit.model import ClassifierConfig, LMConfig, TransformerClassifier, TransformerLM
from attnkit.tasks.classification import ClassifierTask
from attnkit.tasks.language_model import LanguageModelTask, score_texts


class WordTokenizer:
    """Whitespace words -> ids (pad 0, bos 1, eos 2, unk 3, then the words): exact, for synthetic data."""

    pad_id, bos_id, eos_id = 0, 1, 2
    vocabulary = SimpleNamespace(pad_id=0, bos_id=1, eos_id=2)

    def __init__(self, words):
        self.ids = {w: i + 4 for i, w in enumerate(words)}

    def encode(self, text, side="src"):
        return [self.ids.get(w, 3) for w in text.split()]

    def encode_batch(self, texts, side="src"):
        return [self.encode(t) for t in texts]


WORDS = [f"w{i}" for i in range(9)]


def grammar(n, seed):
    """First word uniform over w0..w4, then the following words in order, 3 to 5 words in all.

    Entropy: ln 5 (first word) + ln 3 (length) per sentence of 4 words + eos on average, so the true
    perplexity is exp((ln 5 + ln 3) / 5) = 1.72.
    """
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        first, length = (
            int(torch.randint(0, 5, (1,), generator=g)),
            int(torch.randint(3, 6, (1,), generator=g)),
        )
        out.append(" ".join(WORDS[first + k] for k in range(length)))
    return out


def test_lm_batch_is_bos_text_and_text_eos():
    task, tok = LanguageModelTask(), WordTokenizer(WORDS)
    enc = task.encode(["w0 w1", "", "w2 w3 w4 w5", "w1"], tok, 3)
    assert enc.examples == [[4, 5], [5]] and "1 empty" in enc.dropped and "1 longer" in enc.dropped
    b = task.collate(enc.examples, tok)
    assert b.tokens.tolist() == [[1, 4, 5], [1, 5, 0]]
    assert b.targets.tolist() == [[4, 5, 2], [5, 2, 0]]
    assert b.n_tgt_tokens == 5 and enc.lengths == [(0, 2), (0, 1)]


def test_lm_loss_is_the_summed_next_token_nll():
    torch.manual_seed(0)
    task, tok = LanguageModelTask(), WordTokenizer(WORDS)
    lm = TransformerLM(LMConfig.preset("tiny", vocab_size=13)).eval()
    b = task.collate([[4, 5, 6], [7]], tok)
    out = task.loss(lm, b, tok)
    loss, nll = out.loss, out.nll
    logp = torch.log_softmax(lm(b.tokens), -1)
    manual = -sum(logp[r, t, b.targets[r, t]] for r in range(2) for t in range(4) if b.targets[r, t] != 0)
    assert loss.item() == pytest.approx(manual.item(), rel=1e-5) and nll.item() == pytest.approx(loss.item())


def test_lm_learns_a_synthetic_grammar_to_near_its_true_perplexity():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    task, tok = LanguageModelTask(), WordTokenizer(WORDS)
    lm = TransformerLM(LMConfig.preset("tiny", vocab_size=13))
    opt = torch.optim.Adam(lm.parameters(), lr=3e-3)
    train = task.encode(grammar(2000, 0), tok, 8).examples
    for step in range(200):
        batch = task.collate(train[(step * 32) % 2000 : (step * 32) % 2000 + 32], tok)
        out = task.loss(lm, batch, tok)
        opt.zero_grad()
        (out.loss / batch.n_tgt_tokens).backward()
        opt.step()
    valid = grammar(300, 1)
    scores = score_texts(lm.eval(), tok, valid, torch.device("cpu"))
    assert task.validate(lm, tok, task.encode(valid, tok, 8), valid, torch.device("cpu"))["perplexity"] == (
        scores.perplexity
    )
    true_ppl = math.exp((math.log(5) + math.log(3)) / 5)
    assert scores.perplexity < 1.15 * true_ppl, scores.perplexity  # uniform over 13 tokens would be 13
    assert task.metric == "perplexity" and not task.higher_is_better


def record(label, text, text_b=None):
    return LabelledExample(label, text, text_b)


def test_classifier_examples_pairs_and_truncation():
    task, tok = ClassifierTask(labels=["neg", "pos"]), WordTokenizer(WORDS)
    enc = task.encode(
        [record("pos", "w0 w1"), record("neg", "w2", "w3 w4"), record("neg", "w0 " * 9)], tok, 4
    )
    assert enc.examples == [([4, 5], 1), ([6, 2, 7, 8], 0), ([4, 4, 4, 4], 0)] and "cut 1" in enc.dropped
    assert enc.lengths == [(2, 0), (4, 0), (4, 0)]
    b = task.collate(enc.examples, tok)
    assert b.tokens.tolist()[0] == [4, 5, 0, 0] and b.labels.tolist() == [1, 0, 0] and b.n_tgt_tokens == 3


def test_classifier_needs_two_labels():
    with pytest.raises(Exception, match="at least 2 labels"):
        ClassifierTask(labels=["only"])


def test_classifier_task_loss_and_validation_metrics():
    torch.manual_seed(0)
    task, tok = ClassifierTask(labels=["a", "b", "c"]), WordTokenizer(WORDS)
    clf = TransformerClassifier(ClassifierConfig.preset("tiny", vocab_size=13, n_classes=3)).eval()
    b = task.collate([([4, 5], 0), ([6], 2), ([7, 8, 9], 1)], tok)
    out = task.loss(clf, b, tok)
    expected = torch.nn.functional.cross_entropy(clf(b.tokens), b.labels, reduction="sum")
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5) and out.n_tokens == 3
    smoothed = task.loss(clf, b, tok, epsilon=0.1).loss
    assert smoothed.item() == pytest.approx(
        torch.nn.functional.cross_entropy(
            clf(b.tokens), b.labels, reduction="sum", label_smoothing=0.1
        ).item(),
        rel=1e-5,
    )
    valid = Encoded([([4, 5], 0), ([6], 2), ([7, 8, 9], 1)], [(2, 0), (1, 0), (3, 0)])
    records = [record("a", "w0 w1"), record("c", "w2"), record("b", "w3 w4 w5")]
    metrics = task.validate(clf, tok, valid, records, torch.device("cpu"))
    predicted = clf(b.tokens).argmax(-1)
    assert metrics["accuracy"] == pytest.approx((predicted == b.labels).float().mean().item())
    assert metrics["loss"] == pytest.approx(expected.item() / 3, rel=1e-5)
    assert set(metrics) == set(task.metrics) and task.metric in metrics and task.higher_is_better
    assert task.model_fields() == {"n_classes": 3} and task.checkpoint_fields() == {"labels": ["a", "b", "c"]}
