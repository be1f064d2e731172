"""The consoles, the one error exit and the choice type every `placer` command shares.

A user's mistake ends as one line on stderr with the exit code of docs/contracts.md
(2 bad input, 3 infeasible, 4 no plan in time, 1 other) — never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

out = Console()
err = Console(stderr=True)


def fail(error: Exception) -> NoReturn:
    """Print ``error`` (markup-escaped: messages hold names like ``links[0]``) and exit with its code."""
    err.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(error, "exit_code", 1))


def choices(name: str, values: Iterable[str]) -> type[Enum]:
    """A str Enum of the library's own names (``min-cost`` → member ``min_cost``) for a Typer option."""
    return Enum(name, [(value.replace("-", "_"), value) for value in values], type=str)
