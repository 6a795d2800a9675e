"""``attnkit configs``: the configs attnkit ships, by name, one line each on what it trains."""

from __future__ import annotations

NAME = "configs"


def add_parser(sub) -> None:
    sub.add_parser(
        NAME,
        help="list the shipped configs (train --config NAME takes one from any directory)",
        description="List the configs attnkit ships; train --config NAME, or extends: NAME in a config.",
    )


def run(args) -> None:
    from ..train.shipped import shipped, summary

    found = shipped()
    width = max(map(len, found))
    for name, path in sorted(found.items()):
        print(f"{name:<{width}}  {summary(path)}")
