"""What OpenAI's API says of a continuation, shared by its whole and its streamed answers so the two
agree token for token: the text a completion adds to its prompt, where a stop sequence cuts it,
why it ended, and how a stream of it is told as OpenAI's chunks (:class:`Chunks`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...data.tokenizer import SubwordTokenizer


def after_prompt(tokenizer: SubwordTokenizer, prompt: list[int], tokens: list[int]) -> str:
    """The text ``tokens`` add after ``prompt`` (ids): what the whole decodes to past what the
    prompt decodes to (the space a word-initial piece brings included); the tokens alone where the
    prompt's text is not a prefix of the whole (a normalization that spans the seam)."""
    start = tokenizer.decode(prompt) if prompt else ""
    whole = tokenizer.decode(prompt + tokens) if prompt else tokenizer.decode(tokens)
    return whole[len(start) :] if whole.startswith(start) else tokenizer.decode(tokens)


def cut(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """``text`` up to the first stop sequence in it (which is not returned), and whether one came."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return (text[: min(found)], True) if found else (text, False)


def held_back(text: str, stops: tuple[str, ...]) -> int:
    """How many characters at the end of ``text`` may be the start of a stop sequence: a stream
    sends them only once the next token shows they are not."""
    return max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)


def finish_reason(tokens: list[int], limit: int, stopped: bool) -> str:
    """OpenAI's word for why a choice ended: ``stop`` (the end of text, or a stop sequence) or
    ``length``: the tokens filled ``limit``, whose last place is the end of text's (a search ends
    every text there), so ``limit - 1`` of them."""
    return "stop" if stopped or len(tokens) < limit - 1 else "length"


def error_body(status: int, line: str) -> tuple[int, dict[str, Any]]:
    """OpenAI's error body (its clients read ``error.message``), and its status: a request that
    attnkit cannot take is a 400 there, where attnkit's own endpoints answer 422."""
    status = 400 if status == 422 else status
    kind = "server_error" if status >= 500 else "invalid_request_error"
    code = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}.get(status)
    named = re.match(r"(?:unknown field |missing field )?'?([\w.\[\]]+)'?(?::| must| is)", line)
    body = {"message": line, "type": kind, "param": named.group(1) if named else None, "code": code}
    return status, {"error": body}


def data(chunk: dict[str, Any]) -> bytes:
    """One Server-Sent Event as OpenAI sends it: a ``data:`` line of JSON and no event name."""
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()


@dataclass
class Chunks:
    """One streamed choice as OpenAI's chunks (a :class:`attnkit.serve.stream.Speaker`): the text
    :func:`after_prompt` gives, sent as it becomes final, held back where a stop sequence may be
    starting; the last chunk names the finish reason, then the usage (``include_usage``).

    ``head``: the fields every chunk carries (id, object, created, model); ``chat``: the text goes in
    ``delta.content`` (the first chunk says the role) instead of ``text``."""

    head: dict[str, Any]
    chat: bool
    tokenizer: SubwordTokenizer
    prompt: list[int]  # the prompt's ids ([] for a chat: its answer stands alone)
    limit: int  # new tokens at most, eos included (max_tokens + 1)
    stops: tuple[str, ...]
    usage: dict[str, int] | None  # include_usage: the prompt's count, the rest filled at the end
    tokens: list[int] = field(default_factory=list)
    shown: str = ""  # the text the chunks have carried
    greeted: bool = False  # a chat's first chunk (the role) is sent

    def token(self, item: dict[str, Any]) -> tuple[bytes, bool]:
        if item["token"] is not None:  # None: the text the tokens already gave, made final
            self.tokens.append(item["token"])
        return self._say(final=False)

    def result(self, result: Any) -> bytes:
        ((generation,),) = result  # one prompt's one continuation
        self.tokens = list(generation.tokens)
        said, _ = self._say(final=True)
        return said

    def error(self, status: int, line: str) -> bytes:
        return data(error_body(status, line)[1])

    def _say(self, *, final: bool) -> tuple[bytes, bool]:
        """The chunks the text gained (and the end, if it came): bytes and whether it ended."""
        text = after_prompt(self.tokenizer, self.prompt, self.tokens)
        text, stopped = cut(text, self.stops)
        if not (final or stopped):
            if text.endswith("\ufffd"):  # an incomplete character: the next token completes it
                return b"", False
            text = text[: len(text) - held_back(text, self.stops)]
        said = b""
        if self.chat and not self.greeted:
            self.greeted = True
            said += self._chunk({"role": "assistant", "content": ""}, None)
        if len(text) > len(self.shown) and text.startswith(self.shown):
            said += self._chunk(text[len(self.shown) :], None)
            self.shown = text
        if final or stopped:
            said += self._chunk("", finish_reason(self.tokens, self.limit, stopped))
            if self.usage is not None:
                done = len(self.tokens)
                usage = {
                    **self.usage,
                    "completion_tokens": done,
                    "total_tokens": self.usage["prompt_tokens"] + done,
                }
                said += data({**self.head, "choices": [], "usage": usage})
        return said, stopped

    def _chunk(self, text: str | dict[str, str], finish: str | None) -> bytes:
        if self.chat:
            delta = text if isinstance(text, dict) else ({"content": text} if text else {})
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return data({**self.head, "choices": [choice]})
