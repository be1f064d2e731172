"""CLI commands of the service (serve, jobs): registered onto the `placer` app by placer.cli."""

from __future__ import annotations


def register(app) -> None:  # filled in by the service work
    return None
