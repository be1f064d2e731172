"""The consoles, the one error exit and the choice type every `placer` command shares.

A user's mistake ends as one line on stderr with the exit code of docs/contracts.md
(2 bad input, 3 infeasible, 4 no plan in time, 1 other) — never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from importlib import import_module
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from placer.errors import InputError
from placer.profiles.store import latest_kept

out = Console()
err = Console(stderr=True)


def fail(error: Exception) -> NoReturn:
    """Print ``error`` (markup-escaped: messages hold names like ``links[0]``) and exit with its code."""
    err.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(error, "exit_code", 1))


def choices(name: str, values: Iterable[str]) -> type[Enum]:
    """A str Enum of the library's own names (``min-cost`` → member ``min_cost``) for a Typer option."""
    return Enum(name, [(value.replace("-", "_"), value) for value in values], type=str)


def latest_from_database(chips: set[str] | None) -> dict[str, dict]:
    """``--profiles latest``: the newest stored profile per chip, from the folder ``placer profile chip``
    keeps its results in and the service's database (:func:`placer.profiles.store.latest_kept`); exit 2
    naming both and how to make one when neither holds a profile of these chips."""
    return latest_kept(chips, database=_database)


def _database(chips: set[str] | None) -> dict[str, dict]:
    """The service database's newest profile per chip (its layer imported only now, so that a command
    never loads the service layer otherwise)."""
    try:
        loader = import_module("placer.service.profiles").latest_measured
    except ModuleNotFoundError as e:
        raise InputError(f"the database layer is not installed ({e.name})") from None
    return loader(chips)
