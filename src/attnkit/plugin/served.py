"""What the server asks of a loaded checkpoint (:class:`ServedModel`, which a task's ``TaskInfo.serve``
makes), and the helpers a task's inference wrapper shares."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError


@runtime_checkable
class ServedModel(Protocol):
    """A loaded checkpoint as the server sees it: everything the app and the decoding ask of it
    (``TaskInfo.serve`` makes one; the server refuses to load an object that lacks a member)."""

    name: str  # as requests name it (``--checkpoint NAME=PATH``)
    task: str  # its TaskInfo's name
    arch: str

    def operation(self, op: str, options: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the decoding runs for a :class:`~attnkit.plugin.http.Call`'s ``op``: ``(batched, None)``,
        a function from a batch of inputs to their results, or ``(None, stream)``, a factory of a
        continuous-batching stream (``on_event`` receives what it yields before its result)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What ``GET /v1/models`` says of it (at least ``name``, ``task`` and ``arch``)."""
        ...

    def release(self) -> None:
        """Free the weights; what requests are checked against (tokenizer, config, labels) stays."""
        ...


@runtime_checkable
class ServesText(ServedModel, Protocol):
    """A served model whose inputs are text: what the server's length limits ask of it. One that also
    has ``max_src_tokens`` (an int: the longest input, in tokens) refuses a longer text with 422; one
    without it reads a prefix of a longer text (a classifier)."""

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is as input: what the request limits and the batches count."""
        ...


class ServedWrapper:
    """What lets a task's inference wrapper be served as itself (``TaskInfo.serve = Wrapper.serve``):
    :meth:`serve` opens it from the checkpoint with the wrapper's own ``from_state`` and names it,
    :meth:`release` frees its weights. The wrapper adds ``task``, ``operation`` and ``describe`` (and,
    for text inputs, ``count_tokens``): the rest of :class:`ServedModel`."""

    name: str  # the server's name for it (``--checkpoint NAME=PATH``)
    task: str
    arch: str
    model: Any
    device: Any

    @classmethod
    def from_state(cls, state: dict, *, device: str = "auto", path: Any = "checkpoint") -> Any:
        raise NotImplementedError  # the wrapper's own

    @classmethod
    def serve(cls, name: str, state: dict[str, Any], device: str, **engine: Any) -> Any:
        """The served model; torch alone decodes it, whatever the server's ``engine`` options say."""
        wrapper = cls.from_state(state, device=device, path=name)
        wrapper.name, wrapper.arch = name, state["arch"]
        return wrapper

    def release(self) -> None:
        """Free the weights (they decode in another process); the tokenizer and the rest stay."""
        self.model.to("meta")

    def describe(self) -> dict[str, Any]:
        """What ``GET /v1/models`` says of it: name, task and arch, the wrapper's :meth:`details`,
        then its parameters and device."""
        return {
            "name": self.name,
            "task": self.task,
            "arch": self.arch,
            **self.details(),
            "parameters": parameter_count(self.model),
            "device": str(self.device),
        }

    def details(self) -> dict[str, Any]:
        """What this task's models say of themselves beside the common fields (layers, labels, ...)."""
        return {}


def missing_members(model: object) -> list[str]:
    """The members of :class:`ServedModel` that ``model`` lacks (the server loads none that lacks one)."""
    members = [*ServedModel.__annotations__, *(n for n, v in vars(ServedModel).items() if callable(v))]
    return [m for m in members if not m.startswith("_") and not hasattr(model, m)]


def as_list(inputs: Any, one: tuple[type, ...] = (str,)) -> list:
    """The one shape every task's wrapper takes: one input (an instance of ``one``) or a sequence of
    them, as a list. Results are always a list, one per input, in order."""
    if isinstance(inputs, one):
        return [inputs]
    if isinstance(inputs, (str, bytes)):  # a string where another kind belongs: never its characters
        raise ConfigError(
            f"expected {' or '.join(t.__name__ for t in one)} or a list of them, got {inputs!r:.60}"
        )
    return list(inputs)


def parameter_count(model) -> int:
    """Parameters of a served model, each shared tensor once (tied embeddings count once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
