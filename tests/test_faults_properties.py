"""Property tests from the declarations: every numeric config key and every search flag, drawn at
and beyond its edges (0, negative, huge, NaN, inf, 2**63, denormals), gives a valid config or one
line naming the key (exit 2) — never a traceback, never a value silently kept that cannot work."""

from __future__ import annotations

import dataclasses
import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnkit.decoding.defaults import BOUNDS  # noqa: E402
from attnkit.errors import ConfigError  # noqa: E402
from attnkit.train.config import SECTIONS, load_config  # noqa: E402
from cli_helpers import cli  # noqa: E402

EDGES = [0, -1, 1, 2**31, 2**32, 2**63, -(2**63), 10**30, 0.5, 1e-300, 5e-324, 1e308, -1e308]
FLOAT_EDGES = [math.nan, math.inf, -math.inf]


def numeric_keys() -> list[tuple[str, str, type]]:
    """(section, key, int or float) of every numeric field of every config section."""
    found = []
    for name, section in SECTIONS.items():
        for f in dataclasses.fields(section):
            kind = {"int": int, "float": float}.get(str(f.type))
            if kind is not None:
                found.append((name, f.name, kind))
    return found


def values(kind: type):
    edges = st.sampled_from(EDGES + (FLOAT_EDGES if kind is float else []))
    # subnormals come from EDGES: attnkit flushes them to zero on the CPU, where hypothesis cannot draw them
    drawn = st.integers(-(2**70), 2**70) if kind is int else st.floats(allow_subnormal=False)
    return st.one_of(edges, drawn)


@pytest.mark.parametrize(("section", "key", "kind"), numeric_keys(), ids=lambda x: str(x))
def test_every_numeric_config_key_is_valid_or_one_line(section, key, kind):
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(values(kind))
    def check(value):
        text = repr(value) if isinstance(value, float) else str(value)
        text = {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}.get(text, text)  # YAML's spellings
        try:
            cfg = load_config(None, [f"{section}.{key}={text}"])
        except ConfigError as e:
            assert "\n" not in str(e) and key in str(e), str(e)
            return
        kept = getattr(getattr(cfg, section), key)
        if isinstance(kept, float):
            assert math.isfinite(kept), f"{section}.{key} = {kept} accepted"

    check()


FLAGS = sorted(BOUNDS)


@pytest.mark.parametrize("name", FLAGS)
def test_every_search_flag_is_checked_in_one_line_before_anything_is_read(capsys, tmp_path, name):
    bound = BOUNDS[name]
    sampling = ["--sample"] if name in ("temperature", "top_k", "top_p", "seed") or name == "nbest" else []

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(values(bound.kind))
    def check(value):
        flag = "--" + name.replace("_", "-")
        for command in ("translate", "generate", "caption"):
            where = {"caption": ["--image", "x.png"], "generate": ["--prompt", "a"]}.get(command, [])
            argv = [command, "--checkpoint", tmp_path / "missing.pt", *where, *sampling, flag, repr(value)]
            code, _, err = cli(capsys, *argv)
            lines = err.strip().splitlines()
            assert code == 2 and len(lines) == 1 and "Traceback" not in err, (argv, err)
            if bound.holds(value):  # accepted: the missing checkpoint is what stops it
                cross = ("nbest", "min-length", "max-len")  # a rule between two options, named
                assert "missing.pt" in lines[0] or any(c in lines[0] for c in cross), (argv, err)
            else:
                assert flag in lines[0] or name in lines[0], (argv, err)

    check()
