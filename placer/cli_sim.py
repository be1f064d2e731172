"""CLI commands of the simulator: registered onto the `placer` app by placer.cli."""

from __future__ import annotations


def register(app) -> None:  # filled in by the simulator work
    return None
