"""Declared ranges of numeric options. Each option's :class:`Bound` says its type and range once, and
its checks come from it: the command line's argument types (``attnkit.plugin.flags.bounded``), the search
options (``attnkit.decoding.options.BOUNDS``) and the HTTP schema that states them.

Every bound is finite: an integer that fits where it goes, a float that is a number.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from .denormals import ieee_arithmetic

INT_MAX = 2**31 - 1  # a count or size: fits every integer type it reaches (numpy, torch, CTranslate2)


@dataclass(frozen=True)
class Bound:
    """A field's declared range: ``low``..``high``, excluding ``low`` when ``open_low``."""

    kind: type  # int or float
    low: float
    high: float
    open_low: bool = False

    def holds(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.kind is int and not isinstance(value, numbers.Integral):
            return False
        try:
            v: float = int(value) if self.kind is int else float(value)  # type: ignore[call-overload]
        except OverflowError:  # an integer past any float
            return False
        if self.kind is float and not math.isfinite(v):
            return False
        with ieee_arithmetic():  # the same answer inside a loop that flushes denormals
            return (v > self.low if self.open_low else v >= self.low) and v <= self.high

    def parse(self, text: str) -> int | float:
        """``text`` as this bound's kind, within it; else ValueError saying what was expected."""
        try:
            value: int | float = int(text) if self.kind is int else float(text)
        except ValueError:
            raise ValueError(f"expected {self.describe()}, got {text!r}") from None
        if not self.holds(value):
            raise ValueError(f"expected {self.describe()}, got {text!r}")
        return value

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        low = f"{self.low:,}" if self.kind is int else f"{self.low:g}"
        high = f"{self.high:,}" if self.kind is int else f"{self.high:g}"
        return f"{what} {'over' if self.open_low else 'from'} {low} {'up ' if self.open_low else ''}to {high}"
