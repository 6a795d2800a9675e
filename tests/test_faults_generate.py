"""Fault suite, ``attnkit generate`` (and the sampler ``translate --sample`` shares): sizes that would
allocate without bound are refused or decoded in bounded batches, and seeds, temperatures and nucleus
sizes at the edges of their types are one-line errors or sample correctly, never a traceback.

The language model is untrained (random weights): the command's plumbing is under test, not its text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import save_checkpoint
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.decoding.sampling import SamplingConfig, filter_logits, sample_tokens
from attnkit.errors import ConfigError
from attnkit.model import LMConfig, TransformerLM
from attnkit.tasks.language_model import LanguageModel, generator
from cli_helpers import assert_user_error, cli
from fault_helpers import synthetic_sentences


@pytest.fixture(scope="module")
def lm_ckpt(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    text = synthetic_sentences(200, seed=5)
    tok = SubwordTokenizer.train(text, text, vocab_size=64, num_threads=1, seed=0)
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size, max_len=24)
    state = {
        "arch": "lm",
        "model_config": cfg.to_dict(),
        "model": TransformerLM(cfg).state_dict(),
        "tokenizer": tok.state_dict(),
        "experiment": {},
    }
    return save_checkpoint(state, tmp_path_factory.mktemp("lm") / "lm.pt")


@pytest.mark.parametrize(
    "flags, fragments",
    [
        (["--num-samples", "10000000", "--sample"], ["--nbest", "to 1,000"]),
        (["--beam", "10000"], ["--beam", "to 256"]),
        (["--seed", str(2**80), "--sample"], ["--seed", str(2**80)]),
        (["--seed", str(-(2**64)), "--sample", "--top-k", "3"], ["--seed"]),
    ],
)
def test_generate_refuses_unbounded_sizes_and_seeds(capsys, lm_ckpt, flags, fragments):
    code, out, err = cli(capsys, "generate", "--checkpoint", lm_ckpt, "--prompt", "a", *flags)
    assert_user_error(code, err, *fragments)
    assert out == ""


@pytest.mark.parametrize(
    "flags",
    [
        ["--temperature", "1e-300"],
        ["--temperature", "1e-40"],  # below float32's smallest normal number
        ["--top-p", "1e-300"],
        ["--top-p", "1e-300", "--temperature", "1e-45"],
        ["--temperature", "100"],  # the largest (SearchOptions' bound, the HTTP schema's too)
        ["--seed", str(2**53), "--top-k", "2"],
        ["--seed", "-5", "--top-k", "2"],
    ],
)
def test_generate_samples_at_the_edges_of_temperature_top_p_and_seed(capsys, lm_ckpt, flags):
    code, out, err = cli(
        capsys, "generate", "--checkpoint", lm_ckpt, "--prompt", "a", "--num-samples", "3", "--sample", *flags
    )
    assert code == 0, err
    assert "Traceback" not in err and len(out.splitlines()) == 3


def test_a_tiny_temperature_or_nucleus_is_greedy():
    logp = torch.tensor([[-0.5, -1.0, -3.0, float("-inf")], [-2.0, -2.0, -0.1, -9.0]]).log_softmax(-1)
    for cfg in (
        SamplingConfig(temperature=1e-300),
        SamplingConfig(top_p=1e-300),
        SamplingConfig(1e-40, 0, 1e-40),
    ):
        probs = filter_logits(logp, cfg).softmax(-1)
        assert not probs.isnan().any(), cfg
        assert probs.argmax(-1).tolist() == [0, 2] and torch.allclose(probs.max(-1).values, torch.ones(2))
        tok, score = sample_tokens(logp, cfg, torch.Generator().manual_seed(0))
        assert tok.tolist() == [0, 2] and torch.equal(score, logp[[0, 1], [0, 2]])


def test_many_samples_are_decoded_in_bounded_batches(lm_ckpt, monkeypatch):
    """The rows of one decoding batch never exceed generator.MAX_ROWS, however many samples or prompts."""
    monkeypatch.setattr(generator, "MAX_ROWS", 4)
    seen: list[int] = []
    real = generator.start_from_prompt

    def spy(lm, prompt, **layout):
        seen.append(prompt.size(0))
        return real(lm, prompt, **layout)

    monkeypatch.setattr(generator, "start_from_prompt", spy)
    lm = LanguageModel.from_checkpoint(lm_ckpt, device="cpu")
    prompts = ["a", "b", "a b", "c"]
    samples = lm.generate(prompts, max_new_tokens=3, sample=True, num_samples=7, seed=3)
    assert [len(s) for s in samples] == [7, 7, 7, 7] and max(seen) <= 4 and sum(seen) == 28
    seen.clear()
    beams = lm.generate(prompts, max_new_tokens=3, beam=3, num_samples=2)
    assert [len(b) for b in beams] == [2, 2, 2, 2] and max(seen) == 1  # 3 beams: one prompt in 4 rows
    with pytest.raises(ConfigError, match="seed"):
        lm.generate(prompts, sample=True, seed=2**64)
