"""Ensembles: the searches decode several models as one, averaging their probabilities at each step.

The checks: an ensemble of one is the model; of two identical checkpoints, the checkpoint; of two
different models, the log of the mean of their probabilities (fairseq's rule), with each member's
own cache giving what a full recomputation gives; checkpoints with different tokenizers are refused.
"""

from __future__ import annotations

import math
import shutil

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search
from attnkit.decoding.ensemble import Ensemble
from attnkit.errors import ConfigError
from attnkit.tasks.translation import Translator
from cli_helpers import assert_user_error
from decoding_helpers import cli, save_translation, tiny_tokenizer
from helpers import make_model, random_tokens

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    out = tmp_path_factory.mktemp("ensemble")
    tok = tiny_tokenizer()
    a = save_translation(out / "a.pt", tok, seed=0)
    shutil.copy(a, out / "a_copy.pt")
    return {
        "a": a,
        "a_copy": out / "a_copy.pt",
        "b": save_translation(out / "b.pt", tok, seed=1),
        "other_tok": save_translation(out / "other.pt", tiny_tokenizer(30), seed=0),
    }


def two_models(kind: str):
    torch.manual_seed(5)
    other = make_model(kind)
    with torch.no_grad():  # make_model seeds 0: perturb a copy so the members differ
        for p in other.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return make_model(kind), other


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_an_ensemble_of_one_is_the_model(kind):
    model = make_model(kind)
    src = random_tokens(5, 7, seed=3)
    src[1, 4:] = 0
    alone, one = greedy_search(model, src), greedy_search(Ensemble([model]), src)
    assert [h.tokens for h in alone] == [h.tokens for h in one]
    assert [h.log_prob for h in alone] == pytest.approx([h.log_prob for h in one], abs=1e-5)
    alone_b, one_b = beam_search(model, src, nbest=3), beam_search(Ensemble([model]), src, nbest=3)
    assert [[h.tokens for h in hs] for hs in alone_b] == [[h.tokens for h in hs] for hs in one_b]
    assert [h.score for hs in alone_b for h in hs] == pytest.approx(
        [h.score for hs in one_b for h in hs], abs=1e-5
    )


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_the_ensemble_is_the_log_of_the_mean_probability_and_its_caches_equal_recomputing(kind):
    a, b = two_models(kind)
    ens = Ensemble([a, b])
    src, tgt_in = random_tokens(3, 6, seed=2), random_tokens(3, 5, seed=4)
    with torch.no_grad():
        want = torch.logsumexp(
            torch.stack([a(src, tgt_in).log_softmax(-1), b(src, tgt_in).log_softmax(-1)]), 0
        )
        torch.testing.assert_close(ens(src, tgt_in), want - math.log(2))
        for i, hyp in enumerate(greedy_search(ens, src, max_len_b=12)):  # cached, step by step
            logp = ens(src[i : i + 1], torch.tensor([[1, *hyp.tokens]]))[0]  # recomputed whole
            gold = torch.tensor(hyp.tokens + [2])
            assert hyp.log_prob == pytest.approx(logp.gather(1, gold[:, None]).sum().item(), abs=1e-4)
    greedy, beam1 = greedy_search(ens, src), beam_search(ens, src, beam_size=1, length_penalty=0.0)
    assert [h.tokens for h in greedy] == [hs[0].tokens for hs in beam1]
    assert [h.tokens for h in greedy] != [h.tokens for h in greedy_search(a, src)]  # b has a say


def test_each_member_decodes_one_new_token_a_step_from_its_own_state():
    a, b = two_models("transformer")
    seen: dict[str, list] = {"a": [], "b": []}
    for name, model in (("a", a), ("b", b)):
        decode = model.decode

        def spy(tokens, state, _name=name, _decode=decode, **kw):
            seen[_name].append((tokens.size(1), id(state)))
            return _decode(tokens, state, **kw)

        model.decode = spy
    beam_search(Ensemble([a, b]), random_tokens(2, 5), beam_size=3)
    assert {n for n, _ in seen["a"] + seen["b"]} == {1}
    assert len(seen["a"]) == len(seen["b"]) and not {s for _, s in seen["a"]} & {s for _, s in seen["b"]}


def test_two_identical_checkpoints_translate_as_one(ckpts):
    one = Translator.from_checkpoint(ckpts["a"], device="cpu")
    two = Translator.from_checkpoints([ckpts["a"], ckpts["a_copy"]], device="cpu")
    assert isinstance(two.model, Ensemble) and not isinstance(one.model, Ensemble)
    sentences = ["A dog runs .", "Two men sit in the snow .", ""]
    for beam, nbest in ((1, 1), (4, 2)):
        got, want = (
            two.translate(sentences, beam=beam, nbest=nbest),
            one.translate(sentences, beam=beam, nbest=nbest),
        )
        assert [t.tokens for t in got] == [t.tokens for t in want]
        assert [s for t in got for _, s in t.nbest] == pytest.approx(
            [s for t in want for _, s in t.nbest], abs=1e-5
        )


def test_translate_with_several_checkpoints(ckpts, monkeypatch):
    code, out, err = cli(
        "translate", "--checkpoint", ckpts["a"], ckpts["b"], "--beam", "2", "--device", "cpu",
        stdin="A dog runs .\nThe cat\n", monkeypatch=monkeypatch,
    )  # fmt: skip
    assert code == 0, err
    ens = Translator.from_checkpoints([ckpts["a"], ckpts["b"]], device="cpu")
    assert out.splitlines() == [t.text for t in ens.translate(["A dog runs .", "The cat"], beam=2)]


def test_checkpoints_with_different_tokenizers_are_refused(ckpts, monkeypatch):
    with pytest.raises(ConfigError, match="another tokenizer"):
        Translator.from_checkpoints([ckpts["a"], ckpts["other_tok"]], device="cpu")
    code, _, err = cli(
        "translate", "--checkpoint", ckpts["a"], ckpts["other_tok"], "--device", "cpu",
        stdin="A dog\n", monkeypatch=monkeypatch,
    )  # fmt: skip
    assert_user_error(code, err, str(ckpts["other_tok"]), "another tokenizer", "ensemble")
    with pytest.raises(ConfigError, match="target vocabulary"):
        Ensemble([make_model("transformer"), make_model("transformer", tgt_vocab_size=30)])
