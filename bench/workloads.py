"""The benchmark's workloads: sizes per mode, random token batches and real Multi30k batches."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from attnkit.data.batching import Batch, TokenBatchSampler, collate
from attnkit.data.multi30k import load_multi30k
from attnkit.data.tokenizer import SubwordTokenizer

from .peers.common import BOS, EOS, PAD, VOCAB


@dataclass
class Sizes:
    """Workload of one mode: the issue's CPU benchmark, a tiny smoke test, or the GPU one."""

    train_batch: tuple[int, int]  # (B, length) of the random training batch
    max_tokens: int  # token budget of the Multi30k training batches
    n_real_batches: int  # how many of those batches every peer cycles through
    decode_batch: int  # sentences per decoding call
    n_tokens: int  # output tokens per sentence (EOS disabled until then)
    n_test: int  # test_2016_flickr sentences decoded per repeat
    peak_n: int  # matmul size for the peak FLOP/s measurement


SIZES = {
    "cpu": Sizes((64, 20), 4096, 4, 64, 30, 256, 2048),
    "quick": Sizes((8, 20), 512, 2, 8, 10, 16, 1024),
    "cuda": Sizes((256, 32), 16384, 4, 256, 30, 1000, 8192),
}


def random_batch(batch: int, length: int, seed: int = 0, vocab: int = VOCAB) -> Batch:
    """batch x length random ids in [3, vocab) on both sides, no padding: tgt_in = bos + y,
    tgt_out = y + eos."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, length), generator=g)
    y = torch.randint(3, vocab, (batch, length - 1), generator=g)
    return collate(list(zip(src.tolist(), y.tolist())), pad_id=PAD, bos_id=BOS, eos_id=EOS)


def multi30k_data(data_dir: str | None, sizes: Sizes) -> tuple[list[Batch], list[torch.Tensor], dict]:
    """Real batches: attnkit's joint SentencePiece (8000) trained on Multi30k train de-en.

    Training uses the first ``n_real_batches`` token-budget batches of ``TokenBatchSampler``
    (shuffled, seed 1) for every peer; decoding the first ``n_test`` German sentences of
    test_2016_flickr in batches of ``decode_batch`` (right-padded, in corpus order).
    """
    train = load_multi30k("train", "de", "en", data_dir=data_dir)
    src_text, tgt_text = [s for s, _ in train], [t for _, t in train]
    tok = SubwordTokenizer.train(src_text, tgt_text, vocab_size=VOCAB, joint=True)
    src_ids, tgt_ids = tok.encode_batch(src_text, "src"), tok.encode_batch(tgt_text, "tgt")
    lengths = [(len(s), len(t)) for s, t in zip(src_ids, tgt_ids)]
    sampler = TokenBatchSampler(lengths, max_tokens=sizes.max_tokens, shuffle=True, seed=1)
    chosen = itertools.islice(iter(sampler), sizes.n_real_batches)
    batches = [
        collate([(src_ids[i], tgt_ids[i]) for i in idx], pad_id=PAD, bos_id=BOS, eos_id=EOS) for idx in chosen
    ]
    test = load_multi30k("test_2016_flickr", "de", "en", data_dir=data_dir)[: sizes.n_test]
    test_ids, B = tok.encode_batch([s for s, _ in test], "src"), sizes.decode_batch
    test_src = [
        collate([(s, []) for s in test_ids[i : i + B]], pad_id=PAD, bos_id=BOS, eos_id=EOS).src
        for i in range(0, len(test_ids), B)
    ]
    shapes = [(*b.src.shape, b.tgt_in.size(1), b.n_tgt_tokens) for b in batches]  # (B, S, T, tokens)
    return batches, test_src, {"train_batches_B_S_T_tokens": shapes, "test_sentences": len(test_ids)}
