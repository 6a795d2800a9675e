"""A package's public names, imported when first asked for (PEP 562's module ``__getattr__``).

A task package registers by being imported (its ``TASK``); were its ``__init__`` to import its
modules, every command, ``attnkit --help`` included, would pay for torch to list a verb. With
``__getattr__ = lazy_names(__name__, {"Translator": "translator", ...})`` the package still offers
``from attnkit.tasks.translation import Translator``, importing ``.translator`` only then.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def lazy_names(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name in ``where`` from its module of the package.

    A name may not be a module's of the package (``search`` beside ``search.py``): once anything
    imports that module, Python sets the package's attribute to the module, and the name is lost.
    """
    folders = getattr(sys.modules[package], "__path__", [])
    modules = {Path(f).stem for folder in folders for f in os.listdir(folder) if f.endswith(".py")}
    clash = sorted(set(where) & modules)
    if clash:
        raise ValueError(f"{package}: {', '.join(clash)} also name modules of it; rename the modules")

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # asked once: the next lookup is a plain attribute
        return value

    return __getattr__
