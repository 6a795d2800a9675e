"""Every numeric flag of every command declares its range (an ``attnkit.bounds.Bound`` on its
argparse type) and is checked from it: drawn at and beyond its edges, a value is taken within range or
refused in one line with exit 2, never a traceback."""

from __future__ import annotations

import argparse

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnkit.cli import build_parser, main  # noqa: E402

NOT_NUMBERS = {"device", "split_map"}  # argument types that take names, not numbers
EDGES = ["0", "-0", "-1", "1", "nan", "inf", "-inf", "1e400", "5e-324", "2.5", "", "x", "0x10", "1_000"]
EDGES += [str(2**31), str(2**63), "9" * 30, "-" + "9" * 30]


def flags() -> list[tuple[str, str, argparse.Action]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [
        (command, action.option_strings[-1], action)
        for command, p in sub.choices.items()
        for action in p._actions
        if action.type is not None and action.type is not str and action.option_strings
    ]


def numeric() -> list[tuple[str, str, argparse.Action]]:
    return [f for f in flags() if getattr(f[2].type, "__name__", "") not in NOT_NUMBERS]


def checks_its_range(action: argparse.Action) -> bool:
    """The search flags only parse: SearchOptions checks their declared range, in one place."""
    return getattr(action.type, "__name__", "") not in ("int", "float")


def test_every_numeric_flag_declares_its_range():
    found = numeric()
    assert len(found) >= 60  # every command's, the search flags included
    undeclared = [f"{c} {f}" for c, f, a in found if not hasattr(a.type, "bound")]
    assert not undeclared, undeclared
    assert all(a.type not in (int, float) for _, _, a in found)


def _take(action: argparse.Action, text: str) -> None:
    bound = action.type.bound  # type: ignore[union-attr]
    try:
        value = action.type(text)  # type: ignore[misc]
    except argparse.ArgumentTypeError as e:
        assert "\n" not in str(e) and str(e), (action.option_strings, text, e)
        return
    assert isinstance(value, bound.kind), (action.option_strings, text, value)
    if checks_its_range(action):
        assert bound.holds(value), (action.option_strings, text, value)


@pytest.mark.parametrize("command, flag", [(c, f) for c, f, _ in numeric()])
def test_each_flag_at_and_beyond_its_edges_is_in_range_or_refused(command, flag):
    (action,) = [a for c, f, a in numeric() if (c, f) == (command, flag)]
    bound = action.type.bound
    step = 1 if bound.kind is int else 1e-9 * max(1.0, abs(bound.high))
    edges = [bound.low, bound.high, bound.low - step, bound.high + step, bound.high * 2 + 1]
    for text in [*EDGES, *(str(bound.kind(e)) for e in edges)]:
        _take(action, text)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_drawn_values_are_in_range_or_refused(data):
    command, flag, action = data.draw(st.sampled_from(numeric()))
    text = data.draw(
        st.one_of(
            st.sampled_from(EDGES),
            st.integers().map(str),
            st.floats(allow_subnormal=False).map(repr),  # denormals: in EDGES (a run may flush them)
            st.text(max_size=8),
        )
    )
    _take(action, text)


def test_a_value_out_of_range_is_one_line_and_exit_2_through_the_command(capsys):
    """Through ``main``: the parser's refusal comes before any file is read, naming the flag."""
    for command, flag, action in numeric():
        if not checks_its_range(action):
            continue
        bound = action.type.bound
        beyond = str(bound.kind(bound.high) + 1)
        with pytest.raises(SystemExit) as stop:
            main([command, flag, beyond])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1 and flag in err[0], (command, flag, err)
