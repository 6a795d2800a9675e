"""Hugging Face export: the MarianMTModel folder loads offline and computes what attnkit computes.

On the small model trained on Multi30k in the session (tests/export_helpers.py): teacher-forced
logits within 1e-4 on a padded batch, ``generate`` greedy and beam 4 identical to attnkit's on 100
test_2016_flickr sentences, MarianTokenizer ids and detokenization identical to attnkit's, and
export -> import -> identical translations.
"""

from __future__ import annotations

import json

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search
from attnkit.export import export_checkpoint, import_checkpoint, load_for_export
from export_helpers import flickr_sentences, length_limit, require, trained_checkpoint, workdir

N_SENTENCES = 100


@pytest.fixture(scope="module")
def exported():
    require("transformers", "safetensors")
    from transformers import MarianMTModel, MarianTokenizer

    ckpt = trained_checkpoint()
    out = workdir() / "hf"
    export_checkpoint(ckpt, "huggingface", out)
    model, tokenizer = load_for_export(ckpt)
    hf = MarianMTModel.from_pretrained(str(out), local_files_only=True).eval()
    hf_tok = MarianTokenizer.from_pretrained(str(out), local_files_only=True)
    return model, tokenizer, hf, hf_tok, out


def _padded(seqs: list[list[int]], pad: int = 0) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def test_folder_is_a_marian_model_with_safetensors(exported):
    *_, out = exported
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "marian" and config["decoder_start_token_id"] == 1
    assert (out / "model.safetensors").is_file()
    for name in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        assert (out / name).is_file(), name


def test_logits_match_on_a_padded_batch(exported):
    model, tokenizer, hf, _, _ = exported
    torch.set_num_threads(1)
    sources, references = flickr_sentences(16)
    src = _padded([tokenizer.encode(s, side="src")[: model.config.max_len] for s in sources])
    tgt = _padded([[1, *tokenizer.encode(t, side="tgt")][: model.config.max_len] for t in references])
    with torch.no_grad():
        ours = model(src, tgt)  # (B, T, V)
        theirs = hf(input_ids=src, attention_mask=src != 0, decoder_input_ids=tgt).logits
    real = tgt != 0  # padded target positions are free to differ
    diff = (ours - theirs).abs()[real].max().item()
    assert diff <= 1e-4, diff


@pytest.mark.slow
def test_generate_greedy_equals_attnkit_greedy(exported):
    model, tokenizer, hf, _, _ = exported
    torch.set_num_threads(1)
    sources, _ = flickr_sentences(N_SENTENCES)
    differ, finished = [], 0
    for i, text in enumerate(sources):
        ids = tokenizer.encode(text, side="src")[: model.config.max_len]
        src = torch.tensor([ids])
        ours = greedy_search(model, src)[0].tokens
        limit = length_limit(len(ids), model.config.max_len)
        finished += len(ours) + 1 < limit
        with torch.no_grad():
            out = hf.generate(
                input_ids=src, attention_mask=src != 0, num_beams=1, do_sample=False, max_length=limit + 1
            )[0].tolist()
        theirs = [t for t in out[1:] if t != model.config.eos_id and t != model.config.pad_id]
        if ours != theirs:
            differ.append(i)
    assert finished >= N_SENTENCES // 2, f"only {finished} sentences ended in eos: the model is too weak"
    assert not differ, f"{len(differ)}/{N_SENTENCES} greedy outputs differ (first: sentence {differ[0]})"


@pytest.mark.slow
def test_generate_beam4_equals_attnkit_beam4(exported):
    """``generate(num_beams=4)`` against attnkit's beam 4, both without length normalization.

    The conventions differ otherwise: Marian divides a finished hypothesis' log-probability by
    length^alpha, attnkit by ((5 + length) / 6)^alpha, so only alpha = 0 asks both for the same
    ranking. Both stop a sentence once no live beam can beat its worst finished one (HF's
    ``early_stopping=False`` heuristic, exact when scores are not normalized) and both suppress pad and
    bos without renormalizing. At the length limit HF forces eos with log-probability 0 where
    attnkit keeps eos's own: a sentence whose best hypothesis hits the limit may differ, so those
    are counted apart (none did on the session model).
    """
    model, tokenizer, hf, _, _ = exported
    torch.set_num_threads(1)
    sources, _ = flickr_sentences(N_SENTENCES)
    differ, at_limit = [], 0
    for i, text in enumerate(sources):
        ids = tokenizer.encode(text, side="src")[: model.config.max_len]
        src = torch.tensor([ids])
        ours = beam_search(model, src, beam_size=4, length_penalty=0.0)[0][0].tokens
        limit = length_limit(len(ids), model.config.max_len)
        hit = len(ours) + 1 >= limit
        at_limit += hit
        with torch.no_grad():
            out = hf.generate(
                input_ids=src,
                attention_mask=src != 0,
                num_beams=4,
                do_sample=False,
                length_penalty=0.0,
                early_stopping=False,
                max_length=limit + 1,
            )[0].tolist()
        theirs = [t for t in out[1:] if t != model.config.eos_id and t != model.config.pad_id]
        if ours != theirs and not hit:
            differ.append(i)
    assert at_limit <= N_SENTENCES // 10, (
        f"{at_limit} sentences reached the length limit: the model is too weak"
    )
    assert not differ, f"{len(differ)}/{N_SENTENCES} beam-4 outputs differ (first: sentence {differ[0]})"


def test_marian_tokenizer_agrees_with_attnkit(exported):
    model, tokenizer, _, hf_tok, _ = exported
    sources, references = flickr_sentences(20)
    for text in sources:
        assert hf_tok(text, add_special_tokens=False).input_ids == tokenizer.encode(text, side="src")
        assert hf_tok(text).input_ids == tokenizer.encode(text, side="src") + [model.config.eos_id]
    for text in references:
        ids = tokenizer.encode(text, side="tgt")
        decoded = hf_tok.decode([1, *ids, 2], skip_special_tokens=True)
        assert decoded == tokenizer.decode(ids, side="tgt")


STRESS = ["  zwei   Männer \t", "Ünïcödé ﬁ ½ 𝔘 ", "", "ÄÖÜ Straße!!", "«Ein» „Hund“ – 3,5 km…", "x" * 300]
# Text that looks like a special token is text (attnkit encodes it as characters), and "<" elsewhere
SPECIAL_LOOKING = ["<s>", "</s>", "<pad>", "<unk>", "Ein <s> Hund </s>.", "<pad><unk>", "a</s>b", "▁<s>"]
SPECIAL_LOOKING += ["<<s>>", "< s >", "<s", "s>", "x < y > z", "<S>", "<mask>", "\ue000<s>", " <unk> x"]


def test_default_calls_give_attnkit_ids_and_translations(exported):
    # As a new user calls them: AutoTokenizer(text) with no arguments, generate() with its defaults.
    from transformers import AutoTokenizer

    model, tokenizer, hf, _, out = exported
    auto = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    sources, references = flickr_sentences(N_SENTENCES)
    for text in [*sources, *STRESS, *SPECIAL_LOOKING]:
        assert auto(text).input_ids == tokenizer.encode(text, side="src"), text
    for text in [*references[:20], *SPECIAL_LOOKING]:
        ids = tokenizer.encode(text, side="tgt")
        if tokenizer.unk_id in ids:  # skip_special_tokens drops <unk>, SentencePiece writes it as ⁇
            continue
        assert auto.decode([1, *ids, 2], skip_special_tokens=True) == tokenizer.decode(ids, side="tgt")
    # The model card's call: a padded batch, generate's defaults (greedy), batch_decode.
    batch = sources[:16]
    with torch.no_grad():
        got = auto.batch_decode(
            hf.generate(**auto(batch, return_tensors="pt", padding=True)), skip_special_tokens=True
        )
    src = _padded([tokenizer.encode(text, side="src") for text in batch])
    want = [tokenizer.decode(h.tokens, side="tgt") for h in greedy_search(model, src)]
    assert got == want


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_fast_tokenizer_encodes_as_sentencepiece(model_type):
    require("tokenizers")
    from attnkit.data.tokenizer import SubwordTokenizer
    from attnkit.export.hf_tokenizer import fast_tokenizer

    sources, references = flickr_sentences(300)
    tok = SubwordTokenizer.train(sources, references, vocab_size=500, model_type=model_type, num_threads=1)
    fast = fast_tokenizer(tok.state_dict()["src"])
    for text in [*sources, *references, *STRESS, *SPECIAL_LOOKING]:
        assert fast.encode(text).ids == tok.encode(text, side="src"), text


@pytest.mark.parametrize("kind", ["separate vocabularies", "user symbols"])
def test_marian_tokenizer_where_no_fast_one_is_exact(kind, tmp_path):
    # Two vocabularies (only MarianTokenizer decodes the target side) or user symbols: no tokenizer.json,
    # and the tokenizer's own config says how to call MarianTokenizer for attnkit's ids.
    require("transformers", "safetensors")
    from transformers import AutoTokenizer

    from attnkit.data.tokenizer import SubwordTokenizer
    from attnkit.export.huggingface import export_marian
    from attnkit.model import Transformer, TransformerConfig

    sources, references = flickr_sentences(200)
    options = {"joint": False} if kind == "separate vocabularies" else {"user_symbols": ["<bt>"]}
    tok = SubwordTokenizer.train(sources, references, vocab_size=300, num_threads=1, **options)
    cfg = TransformerConfig.preset("tiny").replace(
        src_vocab_size=tok.src_vocab_size, tgt_vocab_size=tok.tgt_vocab_size, share_vocab=tok.joint
    )
    export_marian(Transformer(cfg).eval(), tok, tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert config["attnkit"] == {"source_eos": False, "encode_sources_with": "add_special_tokens=False"}
    assert not (tmp_path / "hf" / "tokenizer.json").exists()
    auto = AutoTokenizer.from_pretrained(str(tmp_path / "hf"), local_files_only=True)
    for text in [*sources[:20], *SPECIAL_LOOKING]:
        assert auto(text, add_special_tokens=False).input_ids == tok.encode(text, side="src"), text


def test_round_trip_export_import_translates_identically(exported, tmp_path):
    from attnkit.tasks.translation import Translator

    model, *_, out = exported
    ckpt = tmp_path / "imported.pt"
    import_checkpoint("huggingface", out, ckpt)
    back, tokenizer = load_for_export(ckpt)
    assert back.config == model.config and not tokenizer.src_eos
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, back.state_dict()[name]), name
    sources, _ = flickr_sentences(20)
    a = Translator.from_checkpoint(trained_checkpoint(), device="cpu").translate(sources, beam=4)
    b = Translator.from_checkpoint(ckpt, device="cpu").translate(sources, beam=4)
    assert [r.text for r in a] == [r.text for r in b]


@pytest.mark.parametrize(
    "overrides",
    [
        {"activation": "gelu", "bias": False},
        {"activation": "swish", "share_vocab": False, "tie_output": False},
        {"output_bias": True, "max_len": 40},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_every_converted_config_field_gives_equal_logits(overrides, tmp_path):
    """Each field the Marian converter writes (rather than refuses), on an untrained jittered model."""
    require("transformers", "safetensors")
    from transformers import MarianMTModel

    from export_helpers import variant_checkpoint

    name = "-".join(f"{k}{v}" for k, v in overrides.items())
    ckpt = variant_checkpoint(f"hf-{name}", **overrides)
    export_checkpoint(ckpt, "huggingface", tmp_path / "hf")
    model, tokenizer = load_for_export(ckpt)
    hf = MarianMTModel.from_pretrained(str(tmp_path / "hf"), local_files_only=True).eval()
    torch.set_num_threads(1)
    sources, references = flickr_sentences(8)
    n = model.config.max_len
    src = _padded([tokenizer.encode(s, side="src")[:n] for s in sources])
    tgt = _padded([[1, *tokenizer.encode(t, side="tgt")][:n] for t in references])
    with torch.no_grad():
        ours = model(src, tgt)  # (B, T, V)
        theirs = hf(input_ids=src, attention_mask=src != 0, decoder_input_ids=tgt).logits
    assert (ours - theirs).abs()[tgt != 0].max().item() <= 1e-4
