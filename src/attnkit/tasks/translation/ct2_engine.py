"""CTranslate2 as a decoding engine: ``Translator.translate``'s contract, decoded by CTranslate2.

    engine = CT2Translator.from_checkpoint("ckpt.pt", quantize="int8")
    engine.translate(["Ein Hund läuft."], beam=1)

The checkpoint is exported once (:func:`attnkit.export.export_checkpoint`) into a cache folder
beside it, ``<checkpoint>.ct2/<key>``; the key hashes the checkpoint's bytes, attnkit's and
CTranslate2's versions and the exporter's source, so a changed checkpoint (or exporter) exports
again and an unchanged one never does. An export is written into a temporary folder and renamed into
place: two first uses at once both export, one rename wins, neither sees half a model.

Tokens are attnkit's: sentences are encoded by the checkpoint's tokenizer, passed as pieces, and
CTranslate2's pieces decoded back, so both engines read and write the same ids. Each sentence keeps
attnkit's length limit (``max_len_a`` * source tokens + ``max_len_b``, eos included, at most
``max_len`` - 1). CTranslate2 takes one ``max_decoding_length`` per call, and a call per limit
would leave it batches of one or two sentences for a small request (a server's batch of 8 cost
twice the CPU per sentence). So one call decodes everything at the widest limit (CTranslate2 batches
it by ``batch_tokens`` and runs the batches on its ``inter_threads`` replicas), and each sentence
whose answer reaches its own smaller limit is decoded again at that limit. Greedy search gives the
same tokens either way. A beam search can differ only where it runs past a sentence's limit
and then picks a shorter finished hypothesis: on 1,000 test_2016_flickr sentences, none at the
default limits, 1 with limits so tight that 944 searches reach them.

Mapped (the same tokens on 60 test sentences of a small trained model, tests/test_engine_ct2.py):
beam, nbest (``num_hypotheses``), prefix (``target_prefix``), repetition_penalty, and with beam 1
min_length and no_repeat_ngram_size; ``quantize="int8"`` is ``compute_type="int8"``. The length
penalty is CTranslate2's own: a beam's score divided by length^alpha, where attnkit divides by GNMT's
((5 + length) / 6)^alpha, so with alpha > 0 the two engines may rank finished beams differently (alpha
0: the same tokens). Refused (:class:`ConfigError`): min_length and no_repeat_ngram_size
with beam > 1 (8 and 21 of those 60 sentences differed); sampling (CTranslate2's sampler cannot
draw the samples a seed gives attnkit); attention maps. Known difference: a beam search that reaches
a sentence's length limit (attnkit forces eos and counts its log-probability, CTranslate2 stops
without it) may end otherwise. Scores are CTranslate2's log-probabilities: close to attnkit's for the
same tokens (within 0.04 there), further apart with a prefix, min_length or a repetition control.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ...checkpoint import load_checkpoint
from ...decoding import length_limits
from ...decoding.common import Hypothesis
from ...decoding.options import SearchOptions
from ...device import resolve_device
from ...errors import ConfigError
from .ct2_cache import _ct2, _log, exported_model
from .inputs import check_batch_tokens, check_sentences
from .translator import Translation, Translator


def refuses(options: SearchOptions, *, attention: bool = False) -> str | None:
    """What CTranslate2 cannot decode as attnkit does (see the module doc), in one line naming the
    option and the engine; None when it can. The engine's declaration: the command line, the
    server and :meth:`CT2Translator.translate` ask it."""
    if options.sample:
        return (
            "--engine ctranslate2 does not sample: its sampler cannot draw the samples attnkit's seed "
            "gives (use --engine torch)"
        )
    for name, value in (
        ("min length", options.min_length),
        ("no-repeat n-gram size", options.no_repeat_ngram_size),
    ):
        if options.beam > 1 and value:  # measured: 8 and 21 of 60 sentences differ at beam 4
            return (
                f"--engine ctranslate2 takes a {name} with beam 1 only: its beam search applies it "
                "otherwise than attnkit's (use --engine torch)"
            )
    if attention:
        return "--engine ctranslate2 gives no attention maps (the torch model draws them)"
    return None


def thread_counts(device: torch.device, cores: int, threads: int | None = None) -> tuple[int, int]:
    """(inter_threads, intra_threads). On a CPU: ``threads`` given, one replica with that many;
    else up to 4 replicas (groups decode side by side) sharing the cores. On a GPU: one of one."""
    if device.type != "cpu":
        return 1, 1
    if threads:
        return 1, threads
    inter = max(1, min(4, cores))
    return inter, max(1, cores // inter)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class CT2Translator:
    """A CTranslate2 model beside the torch :class:`Translator` whose tokenizer and checks it shares."""

    name = "ctranslate2"

    @staticmethod
    def refuses(options: SearchOptions, *, attention: bool = False) -> str | None:
        """The engine's declaration (:class:`~.translator.TranslationEngine`): :func:`refuses`."""
        return refuses(options, attention=attention)

    def __init__(
        self,
        translator: Translator,
        folder: str | Path,
        *,
        quantize: str | None = None,
        threads: int | None = None,
    ):
        """translator: the torch side (tokenizer, max_len, special ids; its device is the engine's).
        quantize="int8": CTranslate2's int8 compute type. threads: CPU threads (default: the cores)."""
        if quantize not in (None, "int8"):
            raise ConfigError(f"unknown quantize {quantize!r} (choose int8)")
        device = translator.device
        if device.type not in ("cpu", "cuda"):
            raise ConfigError(f"--engine ctranslate2 runs on cpu or cuda, not {device.type}")
        inter, intra = thread_counts(device, cores(), threads)
        self.translator, self.folder = translator, Path(folder)
        self.ct2 = _ct2().Translator(
            str(folder),
            device=device.type,
            device_index=device.index or 0,
            compute_type=quantize or "default",
            inter_threads=inter,
            intra_threads=intra,
        )
        tok = translator.tokenizer
        self._tgt_id = {tok.id_to_piece(i, side="tgt"): i for i in range(tok.tgt_vocab_size)}

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        *,
        device: str = "auto",
        quantize: str | None = None,
        threads: int | None = None,
        log: Callable[[str], None] = _log,
    ) -> CT2Translator:
        blob = Path(path).read_bytes() if Path(path).is_file() else None
        state = load_checkpoint(path, data=blob)  # a missing file: CheckpointError naming it
        folder = exported_model(path, blob, log=log)
        translator = Translator.from_state(state, device=str(resolve_device(device)), path=path)
        return cls(translator, folder, quantize=quantize, threads=threads)

    def translate(
        self,
        sentences: str | list[str],
        options: SearchOptions | None = None,
        *,
        prefix: str | Sequence[str] | None = None,
        batch_tokens: int = 4000,
        return_attention: bool = False,
        **fields: Any,
    ) -> list[Translation]:
        """:meth:`Translator.translate` by CTranslate2; what it cannot honour is a ConfigError."""
        options = SearchOptions.of(options, **fields)
        if why := self.refuses(options, attention=return_attention):
            raise ConfigError(why)
        sentences = check_sentences(sentences)
        check_batch_tokens(batch_tokens)
        nbest, max_len_a, max_len_b = options.nbest, options.max_len_a, options.max_len_b
        t = self.translator
        ids, truncated = t.encode_sources(sentences)
        prefixes = t.target_prefixes(prefix, ids, max_len_a, max_len_b)
        if truncated:
            warnings.warn(
                f"{truncated} input sentence(s) longer than {t.max_src_len} subword tokens were truncated",
                stacklevel=2,
            )
        src_len = torch.tensor([len(seq) for seq in ids])
        limits = length_limits(src_len, max_len_a, max_len_b, t.max_src_len - 1).tolist()
        answers = self._decode(ids, prefixes, limits, options, batch_tokens)
        results = [Translation("", 0.0, [("", 0.0)] * nbest, [], [], []) for _ in sentences]
        for i, r in answers.items():
            hyps = [
                Hypothesis([self._tgt_id[p] for p in pieces], score, score)
                for pieces, score in zip(r.hypotheses, r.scores, strict=True)
            ]
            results[i] = t.translation(ids[i], hyps)
        return results

    def _decode(
        self, ids: list[list[int]], prefixes, limits: list[int], options: SearchOptions, batch_tokens: int
    ):
        """CTranslate2's answer for each non-empty sentence, by index, each within its own limit."""
        search = {
            "beam_size": options.beam,
            "num_hypotheses": options.nbest,
            "length_penalty": options.length_penalty,  # CTranslate2's length^alpha (module doc)
            "no_repeat_ngram_size": options.no_repeat_ngram_size,
            "repetition_penalty": options.repetition_penalty,
            "max_batch_size": batch_tokens,
        }

        def submit(group: list[int], limit: int) -> list[Any]:
            target_prefix = None
            if prefixes is not None:
                target_prefix = [self._pieces(prefixes[i], "tgt") or None for i in group]
            return self.ct2.translate_batch(
                [self._pieces(self._source(ids[i]), "src") for i in group],
                target_prefix,
                batch_type="tokens",
                asynchronous=True,
                max_decoding_length=limit - 1,  # attnkit's limit counts eos, CTranslate2's not
                min_decoding_length=min(options.min_length, limit - 1),  # the length limit wins, as in torch
                max_input_length=0,  # truncated above, as attnkit does
                return_scores=True,
                **search,
            )

        # One call at the largest limit: a call per limit would leave CTranslate2 batches of one or
        # two sentences for a small request. A sentence whose answer reaches its own, smaller limit
        # is decoded again at that limit (the module doc says what this can change).
        todo = [i for i, seq in enumerate(ids) if seq]
        widest = max((limits[i] for i in todo), default=0)
        answers = {i: a.result() for i, a in zip(todo, submit(todo, widest) if todo else [], strict=True)}
        groups: dict[int, list[int]] = {}
        for i in todo:
            # L - 2 tokens or fewer fit the limit's L - 1 whether or not CTranslate2 counts eos in it;
            # from L - 2 on a sentence may have been cut, so it is decoded again (one to spare).
            if limits[i] < widest and max(map(len, answers[i].hypotheses)) >= limits[i] - 2:
                groups.setdefault(limits[i], []).append(i)
        pending = [(group, submit(group, limit)) for limit, group in groups.items()]  # all at once
        for group, again in pending:
            answers.update((i, a.result()) for i, a in zip(group, again, strict=True))
        return answers

    def _source(self, seq: list[int]) -> list[int]:
        """A source as CTranslate2 takes it: without the eos it adds itself (``add_source_eos``)."""
        eos = self.translator.model.config.eos_id
        return seq[:-1] if self.translator.tokenizer.src_eos and seq and seq[-1] == eos else seq

    def _pieces(self, seq: list[int], side: str) -> list[str]:
        return [self.translator.tokenizer.id_to_piece(i, side=side) for i in seq]
