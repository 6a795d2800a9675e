"""CTranslate2 export of the language model (model.arch lm) to a ``ctranslate2.Generator``.

Untrained LMs (tests/export_helpers.py ``lm_checkpoint``) with each positional kind: greedy
``generate_batch`` from ``["<s>", *prompt]`` gives attnkit's greedy continuation token for token on
20 prompts, and ``score_batch`` every log-probability within 1e-4 of attnkit's (pad and bos left
out of attnkit's softmax: CTranslate2 never gives them probability).
"""

from __future__ import annotations

import pytest
import torch

from attnkit.errors import ConfigError
from attnkit.export import export_checkpoint, load_for_export
from export_helpers import flickr_sentences, lm_checkpoint, require, workdir

VARIANTS = {
    "sinusoidal": dict(),
    "learned-untied": dict(positional="learned", tie_output=False, activation="gelu"),
    "relative-pre": dict(positional="relative", relative_clip=4, relative_values=True, norm="pre"),
    "rotary-pre": dict(positional="rotary", norm="pre"),
}
NEW_TOKENS = 12


@pytest.fixture(scope="module", params=list(VARIANTS))
def exported(request):
    require("ctranslate2")
    import ctranslate2

    from attnkit.tasks.language_model.generator import LanguageModel

    ckpt = lm_checkpoint(request.param, **VARIANTS[request.param])
    out = workdir() / f"ct2-lm-{request.param}"
    export_checkpoint(ckpt, "ctranslate2", out)
    model, tokenizer = load_for_export(ckpt)
    generator = ctranslate2.Generator(str(out), device="cpu", intra_threads=1)
    torch.set_num_threads(1)
    _, references = flickr_sentences(20)
    prompts = [" ".join(r.split()[:3]) for r in references]
    return LanguageModel(model, tokenizer), generator, prompts


def _start(tokenizer, ids: list[int]) -> list[str]:
    return ["<s>", *(tokenizer.id_to_piece(i, side="src") for i in ids)]


@pytest.mark.slow
def test_generator_greedy_equals_attnkit_greedy(exported):
    lm, generator, prompts = exported
    ours = [g[0].tokens for g in lm.generate(prompts, max_len_b=NEW_TOKENS + 1)]
    starts = [_start(lm.tokenizer, lm.tokenizer.encode(p, side="src")) for p in prompts]
    results = generator.generate_batch(starts, max_length=NEW_TOKENS, include_prompt_in_result=False)
    piece_id = {lm.tokenizer.id_to_piece(i, side="src"): i for i in range(lm.model.config.vocab_size)}
    theirs = [[piece_id[p] for p in r.sequences[0]] for r in results]
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not differ, f"{len(differ)}/{len(prompts)} differ, first prompt {differ[0]}"


def test_generator_scores_equal_attnkit(exported):
    lm, generator, prompts = exported
    cfg = lm.model.config
    _, references = flickr_sentences(20)
    worst = 0.0
    for text in references[:10]:
        ids = lm.tokenizer.encode(text, side="src")[: cfg.max_len - 1]
        with torch.no_grad():
            logits = lm.model(torch.tensor([[cfg.bos_id, *ids]]))[0]  # (T, V)
        logits[:, [cfg.pad_id, cfg.bos_id]] = float("-inf")
        target = torch.tensor([*ids, cfg.eos_id])[:, None]
        ours = torch.log_softmax(logits, dim=-1).gather(1, target).squeeze(1)  # (T,)
        (r,) = generator.score_batch([[*_start(lm.tokenizer, ids), "</s>"]])
        worst = max(worst, (ours - torch.tensor(r.log_probs)).abs().max().item())
    assert worst <= 1e-4, worst


def test_language_model_to_huggingface_is_refused():
    with pytest.raises(ConfigError, match="--format ctranslate2"):
        export_checkpoint(lm_checkpoint("sinusoidal"), "huggingface", workdir() / "hf-lm")
