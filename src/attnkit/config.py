"""Config dataclasses: validated on construction, round-tripped through plain dicts.

A config is stored in every checkpoint as a dict and rebuilt with :meth:`ConfigBase.from_dict`, so a
misspelled or unknown key is an error that names it instead of a silently ignored setting.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, ClassVar, TypeVar

from .errors import ConfigError

C = TypeVar("C", bound="ConfigBase")


@dataclasses.dataclass
class ConfigBase:
    """Shared behaviour: ``from_dict`` rejects unknown keys, ``validate`` checks values."""

    presets: ClassVar[dict[str, dict[str, Any]]] = {}

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{self._name()}.{f.name} must be an integer, got {value!r}")
            if kind == "float" and isinstance(value, str):
                try:  # YAML 1.1 reads "1e-3" as a string
                    value = float(value)
                    setattr(self, f.name, value)
                except ValueError:
                    pass
            if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"{self._name()}.{f.name} must be a number, got {value!r}")
            if kind == "float" and not math.isfinite(value):  # no key means anything by NaN or inf
                raise ConfigError(f"{self._name()}.{f.name} must be a finite number, got {value!r}")
            if kind == "bool" and not isinstance(value, bool):
                raise ConfigError(f"{self._name()}.{f.name} must be true or false, got {value!r}")
            if kind == "str" and not isinstance(value, str):
                raise ConfigError(f"{self._name()}.{f.name} must be a string, got {value!r}")
        self.validate()

    @classmethod
    def _name(cls) -> str:
        return cls.__name__

    def validate(self) -> None:
        """Subclasses raise :class:`ConfigError` naming the field when a value is invalid."""

    def _check(self, ok: bool, field: str, why: str) -> None:
        if not ok:
            raise ConfigError(f"{self._name()}.{field} = {getattr(self, field)!r}: {why}")

    def _positive(self, *names: str) -> None:
        for name in names:
            self._check(getattr(self, name) > 0, name, "must be positive")

    def _choice(self, name: str, choices: tuple[str, ...]) -> None:
        self._check(getattr(self, name) in choices, name, f"must be one of {', '.join(choices)}")

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls: type[C], values: dict[str, Any]) -> C:
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            close = [m for u in unknown for m in difflib.get_close_matches(u, cls.field_names(), n=1)]
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise ConfigError(
                f"unknown {cls._name()} field(s): {', '.join(unknown)} "
                f"({hint}valid: {', '.join(cls.field_names())})"
            )
        return cls(**values)

    @classmethod
    def preset(cls: type[C], name: str, **overrides: Any) -> C:
        if name not in cls.presets:
            raise ConfigError(f"unknown {cls._name()} preset {name!r} (known: {', '.join(cls.presets)})")
        return cls.from_dict({**cls.presets[name], **overrides})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self: C, **changes: Any) -> C:
        return self.from_dict({**self.to_dict(), **changes})
