"""``attnkit import --format huggingface``: an OPUS-MT-style MarianMTModel becomes an attnkit checkpoint.

The Marian model is built here with OPUS-MT's layout: two SentencePiece models (German and English,
trained in the test on Multi30k, with SentencePiece's own ids), one joint vocab.json whose ids are
not the SentencePiece ids (eos 0, unk 1, pad last), decoding starting from pad, swish activation,
a non-zero final_logits_bias and random weights; one English piece is left out of vocab.json.
"""

from __future__ import annotations

import gzip
import io
import json

import pytest
import torch

from attnkit.cli import main
from attnkit.decoding import greedy_search
from attnkit.export import export_checkpoint, import_checkpoint, load_for_export
from export_helpers import SHARED_DATA, flickr_sentences, length_limit, require, require_data


def _spm(lines: list[str], vocab_size: int) -> bytes:
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=out, vocab_size=vocab_size, num_threads=1, minloglevel=2
    )
    return out.getvalue()


@pytest.fixture(scope="module")
def opus_mt(tmp_path_factory):
    require("transformers", "safetensors", "google.protobuf")
    require_data()
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder = tmp_path_factory.mktemp("opus-mt-de-en")
    lines = {}
    for lang in ("de", "en"):
        with gzip.open(SHARED_DATA / "multi30k" / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines[lang] = [next(f).strip() for _ in range(2000)]
        name = "source.spm" if lang == "de" else "target.spm"
        (folder / name).write_bytes(_spm(lines[lang], 250 if lang == "de" else 200))
    pieces = []
    for name in ("source.spm", "target.spm"):
        sp = spm.SentencePieceProcessor(model_file=str(folder / name))
        pieces += [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]  # past <unk>, <s>, </s>
    dropped = spm.SentencePieceProcessor(model_file=str(folder / "target.spm")).id_to_piece(150)
    vocab = {"</s>": 0, "<unk>": 1}
    for p in pieces:
        if p != dropped:
            vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = pad = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    config = MarianConfig(
        vocab_size=len(vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function="swish",
        max_position_embeddings=128,
        scale_embedding=True,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
        init_std=0.1,
        dropout=0.1,
    )
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 1.0)
        model.final_logits_bias[0, 0] += 3.0  # eos likelier: outputs of random weights end sooner
    model.save_pretrained(folder)
    MarianTokenizer(
        str(folder / "source.spm"),
        str(folder / "target.spm"),
        str(folder / "vocab.json"),
        source_lang="de",
        target_lang="en",
    ).save_pretrained(folder)
    ckpt = tmp_path_factory.mktemp("imported") / "opus.pt"
    import_checkpoint("huggingface", folder, ckpt)
    marian = MarianMTModel.from_pretrained(str(folder), local_files_only=True).eval()
    hf_tok = MarianTokenizer.from_pretrained(str(folder), local_files_only=True)
    return folder, ckpt, marian, hf_tok, vocab


def _rows(tokenizer, vocab: dict[str, int], pad: int) -> dict[int, int]:
    """attnkit target id -> Marian id, for the ids that have one (bos shares pad's row: left out)."""
    rows = {0: pad, 2: vocab["</s>"], 3: vocab["<unk>"]}
    for i in range(4, tokenizer.tgt_vocab_size):
        piece = tokenizer.id_to_piece(i, side="tgt")
        if piece in vocab:
            rows[i] = vocab[piece]
    return rows


def test_imported_config_and_tokenizer(opus_mt):
    _, ckpt, marian, hf_tok, vocab = opus_mt
    model, tokenizer = load_for_export(ckpt)
    cfg = model.config
    assert (cfg.activation, cfg.norm, cfg.d_model, cfg.n_heads, cfg.max_len) == ("swish", "post", 32, 4, 128)
    assert cfg.output_bias and cfg.tie_output and not cfg.share_vocab
    assert tokenizer.src_eos and not tokenizer.joint
    sources, _ = flickr_sentences(20)
    for text in sources:  # same pieces, and Marian's trailing </s>
        ours = [tokenizer.id_to_piece(i, side="src") for i in tokenizer.encode(text, side="src")]
        assert ours == hf_tok.convert_ids_to_tokens(hf_tok(text).input_ids)
    # every Marian token has exactly one attnkit target id
    assert sorted(_rows(tokenizer, vocab, marian.config.pad_token_id).values()) == sorted(vocab.values())


def test_log_probabilities_match_marian(opus_mt):
    _, ckpt, marian, hf_tok, vocab = opus_mt
    model, tokenizer = load_for_export(ckpt)
    sources, references = flickr_sentences(4)
    pad = marian.config.pad_token_id
    rows = _rows(tokenizer, vocab, pad)
    for text, ref in zip(sources, references):
        src = torch.tensor([tokenizer.encode(text, side="src")])
        hf_src = torch.tensor([hf_tok(text).input_ids])
        tgt_ids = tokenizer.encode(ref, side="tgt")[:20]
        pieces = [tokenizer.id_to_piece(i, side="tgt") for i in tgt_ids]
        hf_tgt = torch.tensor([[pad, *[vocab.get(p, vocab["<unk>"]) for p in pieces]]])
        tgt = torch.tensor(
            [[1, *[i if tokenizer.id_to_piece(i, side="tgt") in vocab else 3 for i in tgt_ids]]]
        )
        with torch.no_grad():
            ours = torch.log_softmax(model(src, tgt), dim=-1)[0]  # (T, V_attnkit)
            theirs = torch.log_softmax(marian(input_ids=hf_src, decoder_input_ids=hf_tgt).logits, dim=-1)[0]
        ids = torch.tensor(list(rows))
        diff = (ours[:, ids] - theirs[:, torch.tensor(list(rows.values()))]).abs().max().item()
        assert diff <= 1e-4, diff


@pytest.mark.slow
def test_greedy_equals_marian_generate(opus_mt):
    _, ckpt, marian, hf_tok, vocab = opus_mt
    model, tokenizer = load_for_export(ckpt)
    by_id = {i: p for p, i in vocab.items()}
    pad = marian.config.pad_token_id
    sources, _ = flickr_sentences(30)
    for text in sources:
        ids = tokenizer.encode(text, side="src")
        ours = greedy_search(model, torch.tensor([ids]))[0].tokens
        limit = length_limit(len(ids), model.config.max_len)
        with torch.no_grad():
            out = marian.generate(
                **hf_tok(text, return_tensors="pt"),
                num_beams=1,
                do_sample=False,
                max_length=limit + 1,
                suppress_tokens=[pad],
            )[0].tolist()
        theirs = [by_id[t] for t in out[1:] if t != 0]
        assert [tokenizer.id_to_piece(t, side="tgt") for t in ours] == theirs


def test_every_command_works_on_the_imported_checkpoint(opus_mt, tmp_path, capsys):
    from attnkit.tasks.translation import Translator, attention_maps

    folder, *_ = opus_mt
    ckpt = tmp_path / "cli.pt"
    assert main(["import", "--format", "huggingface", str(folder), "--output", str(ckpt)]) == 0
    translator = Translator.from_checkpoint(ckpt, device="cpu")
    (result,) = translator.translate(["Ein Hund läuft."], beam=2)
    maps = attention_maps(translator, "Ein Hund läuft.", beam=2)
    assert maps.src_pieces[-1] == "</s>" and maps.cross.shape[-1] == len(maps.src_pieces)
    src = tmp_path / "in.de"
    src.write_text("Ein Hund läuft.\n")
    assert (
        main(["translate", "--checkpoint", str(ckpt), "--input", str(src), "--beam", "2", "--device", "cpu"])
        == 0
    )
    assert capsys.readouterr().out.strip().splitlines()[-1] == result.text


def test_import_errors_are_one_line(opus_mt, tmp_path, capsys):
    folder, ckpt, *_ = opus_mt
    assert main(["import", "--format", "huggingface", str(tmp_path), "--output", str(tmp_path / "x.pt")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "config.json" in err
    assert main(["import", "--format", "huggingface", str(folder), "--output", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--force" in err


def test_reexported_import_keeps_the_source_eos(opus_mt, tmp_path):
    """An imported Marian model's sources end in </s>; exporting it again must say so (the exporter
    once wrote source_eos = false for every model, and the next import dropped the </s>)."""
    _, ckpt, *_ = opus_mt
    out = tmp_path / "again"
    export_checkpoint(ckpt, "huggingface", out)
    assert json.loads((out / "config.json").read_text())["attnkit"]["source_eos"] is True
    back = tmp_path / "back.pt"
    import_checkpoint("huggingface", out, back)
    assert load_for_export(back)[1].src_eos


def test_an_imported_marian_model_fine_tunes_and_its_output_changes(opus_mt, tmp_path):
    """train.init_from on an `attnkit import` checkpoint: its tokenizer and model, a fresh run."""
    from attnkit.checkpoint import load_checkpoint
    from attnkit.tasks.translation import Translator
    from attnkit.train import load_config, train
    from test_finetune import domain

    _, ckpt, *_ = opus_mt
    train_tsv, valid_tsv = domain(tmp_path)
    cfg = load_config(
        None,
        [
            "data.corpus=tsv",
            f"data.train_files=[{train_tsv}]",
            f"data.valid_files=[{valid_tsv}]",
            f"train.init_from={ckpt}",
            "train.max_tokens=400",
            "train.schedule=constant",
            "train.lr=0.003",
            "train.warmup_steps=1",
            "train.max_steps=30",
            "valid.every=30",
            "train.progress=false",
            f"output_dir={tmp_path / 'run'}",
        ],
    )
    tuned = train(cfg, log=lambda m: None).last_checkpoint
    imported, state = load_checkpoint(ckpt), load_checkpoint(tuned)
    assert state["tokenizer"] == imported["tokenizer"] and state["model_config"] == imported["model_config"]
    sources = ["ein Hund läuft", "ein Vogel schläft"]
    before = [r.text for r in Translator.from_checkpoint(ckpt, device="cpu").translate(sources)]
    after = [r.text for r in Translator.from_checkpoint(tuned, device="cpu").translate(sources)]
    assert after != before and state["step"] == 30
