"""What every picture must say, as one rule for the pictures the commands write (tests/test_pictures.py)
and the ones the docs show (the site build checks each tutorial's figures with it: docs/conf.py).

Learners read these pictures, so a heatmap names both its axes (on the panel, or once for a grid
of panels: a figure's ``supxlabel``/``supylabel``) and has a colour scale with a label; a line plot
names both its axes. An axis without ticks (a one-row strip) carries nothing to name, and a panel
with its axes off (a photograph, a picture of a saved picture) is what it shows.
"""

from __future__ import annotations

from typing import Any


def colour_scales(fig: Any) -> list[Any]:
    return [ax for ax in fig.axes if hasattr(ax, "_colorbar")]


def panels(fig: Any) -> list[Any]:
    return [ax for ax in fig.axes if not hasattr(ax, "_colorbar")]


def _heatmap(ax: Any) -> bool:
    """Whether the panel shows numbers as colours (a 2-D array, not an RGB picture)."""
    return any(getattr(image.get_array(), "ndim", 0) == 2 for image in ax.get_images())


def _named(fig: Any, ax: Any, axis: str) -> bool:
    """The panel's ``axis`` ("x" or "y") is named, or has no ticks to name."""
    if not len(getattr(ax, f"get_{axis}ticks")()):
        return True
    whole = getattr(fig, f"_sup{axis}label", None)
    return bool(getattr(ax, f"get_{axis}label")() or (whole is not None and whole.get_text()))


def unsaid(fig: Any) -> list[str]:
    """What ``fig`` leaves unsaid, one phrase each (empty: it says all it must)."""
    missing = []
    for i, ax in enumerate(panels(fig)):
        if not ax.axison or not (_heatmap(ax) or ax.lines):
            continue
        name = f"panel {i + 1}" + (f" ({ax.get_title()})" if ax.get_title() else "")
        missing += [f"{name}: its {axis} axis is not named" for axis in "xy" if not _named(fig, ax, axis)]
        if _heatmap(ax) and not colour_scales(fig):
            missing.append(f"{name}: a heatmap without a colour scale")
    for scale in colour_scales(fig):
        if not (scale.get_ylabel() or scale.get_xlabel()):
            missing.append("a colour scale without a label")
    return missing
