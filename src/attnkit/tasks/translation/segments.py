"""A text of many sentences (a paragraph, a document, a page's markup) as the sentences a translator
takes one at a time, and the way back: each translation put where its sentence was, with the
whitespace, line breaks and markup around it kept as they were.

The model was trained on single sentences (Multi30k's captions): given a paragraph as one input it
translates the start and drops the rest. So a text is split at its line breaks, each line into
sentences by pysbd (rules per language, abbreviations such as "Dr." kept whole; a language it has
no rules for is split by its English rules), and HTML's text nodes are split so, the tags between
them never sent to the model (``<script>``, ``<style>`` and comments are kept untouched).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, Sequence
from html.parser import HTMLParser
from typing import Any

Join = Callable[[list[str]], str]  # the translations of the pieces, in order -> the whole text
_EDGES = re.compile(r"^(\s*)(.*?)(\s*)$", re.DOTALL)
_SKIPPED = frozenset({"script", "style", "noscript", "code", "pre"})


@functools.lru_cache(maxsize=32)
def _segmenter(lang: str):
    import pysbd  # the serve extra and attnkit translate --split-sentences need it; nothing else does

    try:
        return pysbd.Segmenter(language=lang, clean=False)
    except ValueError:  # pysbd: "Provide valid language ID ..." (cs, for one): the English rules
        return pysbd.Segmenter(language="en", clean=False)


def sentences(text: str, lang: str | None = None) -> tuple[list[str], Join]:
    """The sentences of ``text`` (none blank, each without the whitespace around it), and the
    function that puts their translations back: every character between sentences kept."""
    pieces: list[str] = []
    layout: list[str | int] = []  # the text between sentences, and the index of each sentence
    segmenter = _segmenter((lang or "en").lower())
    for line in text.splitlines(keepends=True):
        cursor = 0
        for sentence in segmenter.segment(line) if line.strip() else []:
            core = sentence.strip()
            start = line.find(core, cursor) if core else -1
            if start < 0:  # pysbd changed it (it should not with clean=False): keep it whole
                continue
            layout += [line[cursor:start], len(pieces)]
            pieces.append(core)
            cursor = start + len(core)
        layout.append(line[cursor:])

    def join(translations: list[str]) -> str:
        return "".join(p if isinstance(p, str) else translations[p] for p in layout)

    return pieces, join


def split_texts(
    texts: Sequence[str], lang: str | None, *, markup: bool = False
) -> tuple[list[str], Callable[[list[Any]], list[Any]]]:
    """Every sentence of every text (:func:`sentences`, or :func:`html_sentences` for ``markup``),
    to translate in one batch, and the function that turns their translations (a translator's
    :class:`~.translator.Translation`, in order) into one per text: its sentences' joined back, its
    score their mean, its n-best the k-th best of each sentence joined (a text without a sentence
    comes back as it is, score 0)."""
    from .translator import Translation

    split = [html_sentences(t, lang) if markup else sentences(t, lang) for t in texts]

    def combine(results: list[Any]) -> list[Any]:
        done, out = iter(results), []
        for pieces, join in split:
            mine = [next(done) for _ in pieces]
            n = max((len(r.nbest) for r in mine), default=1)
            kth = [[r.nbest[min(k, len(r.nbest) - 1)] for r in mine] for k in range(n)]
            nbest = [(join([t for t, _ in hyps]), _mean([s for _, s in hyps])) for hyps in kth]
            text = join([r.text for r in mine])
            out.append(Translation(text, _mean([r.score for r in mine]), nbest, [], [], []))
        return out

    return [p for pieces, _ in split for p in pieces], combine


def by_sentences(
    texts: Sequence[str], lang: str | None, translate: Callable[[list[str]], list[Any]]
) -> list[Any]:
    """Each text translated sentence by sentence, all in one call of ``translate`` (:func:`split_texts`)."""
    pieces, combine = split_texts(texts, lang)
    return combine(translate(pieces))


def _mean(scores: list[float]) -> float:
    return sum(scores) / len(scores) if scores else 0.0


def one_piece(text: str) -> tuple[list[str], Join]:
    """``text`` as a single sentence (no splitting), its surrounding whitespace kept."""
    lead, core, trail = _EDGES.match(text).groups()  # type: ignore[union-attr]  # always matches
    if not core:
        return [], lambda _: text
    return [core], lambda t: lead + t[0] + trail


def html_sentences(markup: str, lang: str | None = None, *, split: bool = True) -> tuple[list[str], Join]:
    """The sentences of ``markup``'s text nodes (entities decoded), and the function that puts their
    translations back into the markup (escaped), every tag and attribute as it was."""
    parts = _Nodes()
    parts.feed(markup)
    parts.close()
    pieces: list[str] = []
    joins: list[tuple[int, int, Join]] = []  # each text node: its first piece, its count, its join
    split_node = (lambda text: sentences(text, lang)) if split else one_piece
    for i, (kind, raw) in enumerate(parts.parts):
        if kind == "text":
            found, join = split_node(html.unescape(raw))
            joins.append((i, len(pieces), join))
            pieces += found
            parts.counts[i] = len(found)

    def rebuild(translations: list[str]) -> str:
        out = [raw for _, raw in parts.parts]
        for i, first, join in joins:
            out[i] = html.escape(join(translations[first : first + parts.counts[i]]), quote=False)
        return "".join(out)

    return pieces, rebuild


class _Nodes(HTMLParser):
    """The markup as its parts in order: ("text", raw text) to translate, ("keep", raw) the rest."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.parts: list[tuple[str, str]] = []
        self.counts: dict[int, int] = {}
        self.skipping: list[str] = []

    def _keep(self, raw: str) -> None:
        self.parts.append(("keep", raw))

    def handle_starttag(self, tag, attrs):
        self._keep(self.get_starttag_text() or "")
        if tag in _SKIPPED:
            self.skipping.append(tag)

    def handle_startendtag(self, tag, attrs):
        self._keep(self.get_starttag_text() or "")

    def handle_endtag(self, tag):
        self._keep(f"</{tag}>")
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()

    def handle_data(self, data):
        if self.skipping or not data.strip():
            self._keep(data)
        elif self.parts and self.parts[-1][0] == "text":  # text split by an entity: one node
            self.parts[-1] = ("text", self.parts[-1][1] + data)
        else:
            self.parts.append(("text", data))

    def handle_entityref(self, name):
        self.handle_data(f"&{name};")

    def handle_charref(self, name):
        self.handle_data(f"&#{name};")

    def handle_comment(self, data):
        self._keep(f"<!--{data}-->")

    def handle_decl(self, decl):
        self._keep(f"<!{decl}>")

    def handle_pi(self, data):
        self._keep(f"<?{data}>")

    def unknown_decl(self, data):
        self._keep(f"<![{data}]>")
