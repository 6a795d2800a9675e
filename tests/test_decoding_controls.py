"""Decoding controls: a forced target prefix, min_length, max_len_a/b, no_repeat_ngram_size and the
repetition penalty, in the one search (greedy, beam, sampling, the pool), the Python API and the CLI.

The checks: a prefix starts every output and its tokens score their own log-probability; beam 1
equals greedy and the pool equals beam search with the controls on; greedy with the controls equals
a reference that recomputes the whole sequence and applies them by hand; the limits hold; a penalty
of 1 is no penalty; bad values are one-line errors with exit code 2.
"""

from __future__ import annotations

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search, sample_search
from attnkit.decoding.continuous import BeamPool
from attnkit.decoding.controls import Controls
from attnkit.errors import ConfigError
from attnkit.tasks.language_model import LanguageModel
from attnkit.tasks.translation import Translator
from cli_helpers import assert_user_error
from decoding_helpers import cli, repeated_ngram, save_translation, tiny_lm, tiny_tokenizer
from helpers import make_model, random_tokens

PREFIXES = [[5, 6, 7], [], [9], [4, 4, 4, 4], [3], [10, 11]]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, tok):
    return save_translation(tmp_path_factory.mktemp("controls") / "mt.pt", tok)


def eos_loving(model, bonus: float = 20.0):
    """Make ``model`` end at once unless eos is banned: its decode adds ``bonus`` to eos's logit."""
    decode = model.decode

    def biased(tokens, state, **kw):
        out = decode(tokens, state, **kw)
        out.logits[..., model.config.eos_id] += bonus
        return out

    model.decode = biased
    return model


# -- the search ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_a_prefix_starts_every_output_of_greedy_beam_and_sampling(kind):
    model = make_model(kind)
    src = random_tokens(6, 7, seed=3)
    src[2, 3:] = 0
    greedy = greedy_search(model, src, prefix=PREFIXES)
    beam = beam_search(model, src, beam_size=3, nbest=3, prefix=PREFIXES)
    samples = sample_search(model, src, num_samples=4, seed=1, prefix=PREFIXES)
    for p, g, hyps, drawn in zip(PREFIXES, greedy, beam, samples, strict=True):
        assert g.tokens[: len(p)] == p
        assert len(hyps) == 3 and all(h.tokens[: len(p)] == p for h in hyps)
        assert all(s.tokens[: len(p)] == p for s in drawn)
    assert any(g.tokens[:1] != p[:1] for g, p in zip(greedy_search(model, src), PREFIXES) if p)  # not free
    beam1 = beam_search(model, src, beam_size=1, length_penalty=0.0, prefix=PREFIXES)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam1]


def test_forced_tokens_score_their_own_log_probability():
    model = make_model("transformer")
    src = random_tokens(3, 5)
    for i, hyp in enumerate(greedy_search(model, src, prefix=PREFIXES[:3])):
        tgt_in = torch.tensor([[1] + hyp.tokens])
        logp = model(src[i : i + 1], tgt_in).log_softmax(-1)[0]
        gold = torch.tensor(hyp.tokens + [2])
        assert hyp.log_prob == pytest.approx(logp.gather(1, gold[:, None]).sum().item(), abs=1e-4)


def test_a_prefix_longer_than_the_length_limit_is_an_error():
    model = make_model("transformer")
    with pytest.raises(ConfigError, match="prefix 0 has 4 tokens: its length limit allows at most 3"):
        greedy_search(model, random_tokens(1, 5), max_len_a=0, max_len_b=4, prefix=[[5, 6, 7, 8]])
    with pytest.raises(ConfigError, match="cannot be generated"):
        beam_search(model, random_tokens(1, 5), prefix=[[5, 2]])  # eos inside


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_controls_keep_beam_1_equal_to_greedy(kind):
    model = make_model(kind)
    src = random_tokens(5, 6, seed=4)
    controls = Controls(no_repeat_ngram_size=2, repetition_penalty=1.5)
    greedy = greedy_search(model, src, controls=controls, max_len_b=20)
    beam = beam_search(model, src, beam_size=1, length_penalty=0.0, controls=controls, max_len_b=20)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]
    assert [h.tokens for h in greedy] != [h.tokens for h in greedy_search(model, src, max_len_b=20)]
    for h in greedy:
        assert repeated_ngram([1, *h.tokens], 2) is None


def test_the_pool_gives_what_beam_search_gives_with_prefixes_and_controls():
    model = make_model("transformer")
    srcs = [random_tokens(1, n, seed=20 + n) for n in (3, 6, 4)]
    prefixes = [[5, 6], [], [7]]
    opts = dict(beam_size=3, nbest=2, length_penalty=0.6, min_len=2)
    controls = Controls(no_repeat_ngram_size=3, repetition_penalty=1.2)
    pool = BeamPool(model, **opts, controls=controls)
    got = {}
    for i, (src, prefix) in enumerate(zip(srcs, prefixes, strict=True)):  # one joins at each step
        pool.add(src, [i], prefix=[prefix])
        got.update(pool.step())
    while len(pool):
        got.update(pool.step())
    for i, (src, prefix) in enumerate(zip(srcs, prefixes, strict=True)):
        (alone,) = beam_search(model, src, **opts, controls=controls, prefix=[prefix])
        assert [h.tokens for h in got[i]] == [h.tokens for h in alone]
        assert [h.score for h in got[i]] == pytest.approx([h.score for h in alone], abs=1e-5)


def test_the_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens():
    logits = torch.tensor([[2.0, -2.0, 1.0, 0.5, -1.0]])
    got = Controls(repetition_penalty=2.0).reshape_logits(logits, torch.tensor([[3, 0, 1, 1, 4]]), pad_id=3)
    assert got.tolist() == [[1.0, -4.0, 1.0, 0.5, -2.0]]  # pad (3 here) is no token: left alone


def test_the_ngram_ban_removes_exactly_the_tokens_that_would_repeat_an_ngram():
    logp = torch.zeros(2, 8)
    history = torch.tensor([[1, 5, 6, 7, 5, 6], [1, 3, 4, 3, 4, 3]])  # newest last
    Controls(no_repeat_ngram_size=3).ban(logp, history, pad_id=0, eos_id=2, eos=torch.zeros(2))
    assert (logp == float("-inf")).nonzero().tolist() == [[0, 0], [0, 7], [1, 0], [1, 4]]  # (pad: harmless)
    one = torch.zeros(1, 8)
    Controls(no_repeat_ngram_size=1).ban(one, history[:1], pad_id=0, eos_id=2, eos=torch.zeros(1))
    assert torch.isinf(one[0]).nonzero().squeeze(1).tolist() == [1, 5, 6, 7]


# -- the language model -------------------------------------------------------------------------


def reference_greedy(lm, prompt: list[int], n: int, penalty: float, ngram: int) -> list[int]:
    """Greedy continuation recomputing everything each step, the controls applied by hand (HF's way)."""
    seq, out = [lm.config.bos_id, *prompt], []
    for _ in range(n):
        logits = lm(torch.tensor([seq]))[0, -1].clone()
        for t in set(seq):
            logits[t] = logits[t] * penalty if logits[t] < 0 else logits[t] / penalty
        logp = logits.log_softmax(-1)
        logp[[0, 1]] = float("-inf")
        for i in range(len(seq) - ngram + 1):
            if seq[i : i + ngram - 1] == seq[len(seq) - ngram + 1 :]:
                logp[seq[i + ngram - 1]] = float("-inf")
        tok = int(logp.argmax())
        if tok == lm.config.eos_id:
            break
        out.append(tok)
        seq.append(tok)
    return out


def test_lm_controls_equal_a_recomputing_reference_for_greedy_beam_1_and_top_k_1(tok):
    lm = LanguageModel(tiny_lm(tok), tok, "cpu")
    prompts = ["A dog", "Two men runs"]
    opts = dict(max_new_tokens=26, repetition_penalty=1.8, no_repeat_ngram_size=3)  # 25 and eos
    greedy = lm.generate(prompts, **opts)
    beam1 = lm.generate(prompts, beam=1, **opts)
    top1 = lm.generate(prompts, sample=True, top_k=1, **opts)
    for text, g, b, s in zip(prompts, greedy, beam1, top1, strict=True):
        want = reference_greedy(lm.model, tok.encode(text), 25, 1.8, 3)
        assert g[0].tokens == b[0].tokens == s[0].tokens == want
    assert [g[0].tokens for g in lm.generate(prompts, max_new_tokens=26)] != [g[0].tokens for g in greedy]


def test_no_repeated_ngram_in_100_sampled_lm_generations(tok):
    lm = LanguageModel(tiny_lm(tok), tok, "cpu")
    opts = dict(max_new_tokens=30, sample=True, temperature=0.7, num_samples=100, seed=3)
    prompt = tok.encode("A dog")
    free = lm.generate(["A dog"], **opts)[0]
    assert any(repeated_ngram(prompt + g.tokens, 2) for g in free)  # repeats happen without the ban
    banned = lm.generate(["A dog"], no_repeat_ngram_size=2, **opts)[0]
    assert len(banned) == 100
    for g in banned:
        assert repeated_ngram(prompt + g.tokens, 2) is None, g.tokens


def test_lm_min_length_masks_eos_before_it(tok):
    lm = LanguageModel(eos_loving(tiny_lm(tok)), tok, "cpu")
    assert [g[0].tokens for g in lm.generate(["A dog"], beam=2)] == [[]]  # eos at once, left free
    for gens in (
        lm.generate(["A dog", ""], min_length=5),
        lm.generate(["A dog"], min_length=5, beam=3, num_samples=2),
        lm.generate(["A dog"], min_length=5, sample=True, num_samples=5),
    ):
        assert all(len(g.tokens) == 5 for gs in gens for g in gs)


def test_a_repetition_penalty_of_1_is_no_penalty(tok, ckpt):
    lm = LanguageModel(tiny_lm(tok), tok, "cpu")
    for opts in ({}, {"beam": 3, "num_samples": 2}, {"sample": True, "num_samples": 3}):
        plain, one = lm.generate(["A dog"], **opts), lm.generate(["A dog"], repetition_penalty=1.0, **opts)
        assert [(g.tokens, g.score) for g in plain[0]] == [(g.tokens, g.score) for g in one[0]]
    mt = Translator.from_checkpoint(ckpt, device="cpu")
    for beam in (1, 3):
        plain, one = (
            mt.translate(["Ein Hund"], beam=beam),
            mt.translate(["Ein Hund"], beam=beam, repetition_penalty=1),
        )
        assert [(t.tokens, t.score) for t in plain] == [(t.tokens, t.score) for t in one]
    assert not Controls(repetition_penalty=1.0).active


# -- the translator -----------------------------------------------------------------------------


def test_translator_prefix_min_length_and_length_limits(tok, ckpt):
    mt = Translator.from_checkpoint(ckpt, device="cpu")
    sentences = ["A dog runs .", "Two men", "", "The cat sleeps at home ."]
    prefixes = ["A woman", "", "The cat", "Three"]
    for beam in (1, 4):
        found = mt.translate(sentences, beam=beam, prefix=prefixes, max_len_b=30)
        for text, prefix, t in zip(sentences, prefixes, found, strict=True):
            if text:
                assert t.tokens[: len(tok.encode(prefix, side="tgt"))] == tok.encode(prefix, side="tgt")
                assert t.text.startswith(prefix)
        assert found[2].text == ""  # an empty source stays empty
    for a, b in ((0.0, 4), (1.0, 1), (0.5, 2)):
        for t, text in zip(mt.translate(sentences, beam=3, max_len_a=a, max_len_b=b), sentences, strict=True):
            assert len(t.tokens) <= max(a * len(tok.encode(text)) + b, 1) - 1
    eos_loving(mt.model)
    assert {len(t.tokens) for t in mt.translate(sentences[:2], beam=2)} == {0}
    for beam in (1, 3):
        assert {len(t.tokens) for t in mt.translate(sentences[:2], beam=beam, min_length=4)} == {4}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size must be an integer from 0 to 1,000, got -1"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be a number from 0.01 to 100, got 0.0"),
        ({"repetition_penalty": -1.2}, "repetition_penalty must be a number from 0.01 to 100, got -1.2"),
        ({"repetition_penalty": 1e-30}, "repetition_penalty must be a number from 0.01"),
        ({"min_length": -1}, "min_length must be an integer from 0 to 100,000, got -1"),
        ({"max_len_a": -0.5}, "max_len_a must be a number from 0 to 1000, got -0.5"),
        ({"max_len_a": 1e18}, "max_len_a must be a number from 0 to 1000"),
        ({"max_len_b": -1}, "max_len_b must be an integer from 0 to 100,000, got -1"),
        ({"max_len_b": 10**23}, "max_len_b must be an integer from 0 to 100,000"),
        ({"prefix": "A dog runs", "max_len_a": 0, "max_len_b": 5}, "prefix of sentence 1 has 11 tokens"),
        ({"prefix": ["A", "B"]}, "2 prefixes for 1 sentences"),
    ],
)
def test_bad_options_are_named_errors(ckpt, tok, options, message):
    mt = Translator.from_checkpoint(ckpt, device="cpu")
    with pytest.raises((ConfigError, ValueError), match=message):
        mt.translate(["Ein Hund"], **options)
    lm_options = {
        k: v for k, v in options.items() if k in ("no_repeat_ngram_size", "repetition_penalty", "min_length")
    }
    if lm_options:
        with pytest.raises(ConfigError, match=message):
            LanguageModel(tiny_lm(tok), tok, "cpu").generate(["A dog"], **lm_options)


# -- the command line ---------------------------------------------------------------------------


def test_translate_prefix_file_and_length_flags(ckpt, tok, tmp_path, monkeypatch):
    src, prefixes = tmp_path / "src.txt", tmp_path / "prefix.txt"
    src.write_text("A dog runs .\nTwo men\n\n", encoding="utf-8")
    prefixes.write_text("A woman\n\nThe cat\n", encoding="utf-8")
    for beam in ("1", "3"):
        code, out, err = cli(
            "translate",
            "--checkpoint",
            ckpt,
            "--input",
            src,
            "--prefix-file",
            prefixes,
            "--beam",
            beam,
            "--max-len-b",
            "30",
            "--device",
            "cpu",
        )
        assert code == 0, err
        lines = out.split("\n")
        assert lines[0].startswith("A woman") and lines[2] == "" and len(lines) == 4
    code, out, err = cli(
        "translate",
        "--checkpoint",
        ckpt,
        "--max-len-a",
        "0",
        "--max-len-b",
        "3",
        "--no-repeat-ngram-size",
        "2",
        "--repetition-penalty",
        "1.3",
        "--min-length",
        "1",
        "--device",
        "cpu",
        stdin="A dog runs .\nTwo men\n",
        monkeypatch=monkeypatch,
    )
    assert code == 0, err
    for line in out.splitlines():
        assert (
            1 <= len(tok.encode(line, side="tgt")) <= 2 + 1
        )  # 2 pieces (detokenizing may merge or split one)


CONTROL_FLAGS = [
    (["--no-repeat-ngram-size", "-1"], ["--no-repeat-ngram-size", "-1"]),
    (["--repetition-penalty", "0"], ["--repetition-penalty", "0"]),
    (["--repetition-penalty", "-2"], ["--repetition-penalty", "-2"]),
    (["--min-length", "-3"], ["--min-length", "-3"]),
]
LENGTH_FLAGS = [
    (["--max-len-a", "-1"], ["--max-len-a", "a number from 0 to 1000", "-1"]),
    (["--max-len-b", "-1"], ["--max-len-b", "-1"]),
    (["--max-len-a", "nan"], ["--max-len-a", "nan"]),
    (["--max-len-a", "1e18"], ["--max-len-a", "1e+18"]),
    (["--max-len-b", "99999999999999999999999"], ["--max-len-b", "99999999999999999999999"]),
    (["--repetition-penalty", "1e-30"], ["--repetition-penalty", "1e-30"]),
]


@pytest.mark.parametrize(
    "command, flags, fragments",
    [("translate", *case) for case in CONTROL_FLAGS + LENGTH_FLAGS]
    + [("generate", *c) for c in CONTROL_FLAGS],
)
def test_bad_control_flags_are_one_line_with_exit_2(tmp_path, command, flags, fragments):
    extra = ["--prompt", "A"] if command == "generate" else []
    assert_user_error(*cli(command, "--checkpoint", tmp_path / "x.pt", *extra, *flags)[::2], *fragments)


def test_translate_bad_prefixes_are_one_line_with_exit_2(ckpt, tmp_path, monkeypatch):
    prefixes = tmp_path / "prefix.txt"
    prefixes.write_text("A dog runs on the grass\n", encoding="utf-8")
    code, _, err = cli(
        "translate",
        "--checkpoint",
        ckpt,
        "--prefix-file",
        prefixes,
        "--max-len-b",
        "4",
        "--device",
        "cpu",
        stdin="Ein Hund\n",
        monkeypatch=monkeypatch,
    )
    assert_user_error(code, err, "prefix of sentence 1", "length limit")
    code, _, err = cli(
        "translate",
        "--checkpoint",
        ckpt,
        "--prefix-file",
        prefixes,
        "--device",
        "cpu",
        stdin="Ein Hund\nZwei\n",
        monkeypatch=monkeypatch,
    )
    assert_user_error(code, err, "--prefix-file", "1 lines, the input 2")
    code, _, err = cli(
        "translate",
        "--checkpoint",
        ckpt,
        "--prefix-file",
        tmp_path / "none.txt",
        stdin="Ein Hund\n",
        monkeypatch=monkeypatch,
    )
    assert_user_error(code, err, "none.txt")


def test_generate_controls_on_the_command_line(tok, tmp_path):
    from attnkit.checkpoint import save_checkpoint

    lm = tiny_lm(tok)
    path = save_checkpoint(
        {
            "tokenizer": tok.state_dict(),
            "experiment": {},
            "arch": "lm",
            "model_config": lm.config.to_dict(),
            "model": lm.state_dict(),
        },
        tmp_path / "lm.pt",
    )
    code, out, err = cli(
        "generate",
        "--checkpoint",
        path,
        "--prompt",
        "A dog",
        "--sample",
        "--temperature",
        "0.7",
        "--num-samples",
        "20",
        "--no-repeat-ngram-size",
        "2",
        "--min-length",
        "3",
        "--max-new-tokens",
        "20",
        "--device",
        "cpu",
    )
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 20
    code, _, err = cli(
        "generate",
        "--checkpoint",
        path,
        "--prompt",
        "A",
        "--min-length",
        "9",
        "--max-new-tokens",
        "5",
        "--device",
        "cpu",
    )
    assert_user_error(code, err, "--min-length 9 is more than the length limit allows (max_len_b 5")
