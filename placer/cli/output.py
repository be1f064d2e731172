"""The consoles and the one error exit every `placer` command shares.

A user's mistake ends as one line on stderr with the exit code of docs/contracts.md
(2 bad input, 3 infeasible, 4 no plan in time, 1 other) — never a traceback.
"""

from __future__ import annotations

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
