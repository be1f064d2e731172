"""The consoles, the one error exit, the progress of long solves and the choice type every `placer`
command shares.

in:  an error, a long computation, a command's choice names; out: the exit, the progress on stderr, an Enum.

A user's mistake ends as one line on stderr with the exit code of docs/contracts.md
(2 bad input, 3 infeasible, 4 no plan in time, 1 other) — never a traceback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from importlib import import_module
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from placer.errors import InputError

out = Console()
err = Console(stderr=True)


def fail(error: Exception) -> NoReturn:
    """Print ``error`` (markup-escaped: messages hold names like ``links[0]``) and exit with its code."""
    err.print(f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(error, "exit_code", 1))


#: a solve that takes longer than this says it is working (stderr)
PROGRESS_AFTER_S = 2.0


@contextmanager
def working(what: str = "solving") -> Iterator[Callable[[str], None]]:
    """Around a long computation: after :data:`PROGRESS_AFTER_S` seconds, a spinner with the elapsed time on
    stderr when it is a terminal, else one line ``solving…``; nothing on stdout (``--json`` stays clean)
    and nothing at all for a quick one. Yields ``say(text)``: the spinner shows the latest text beside
    the elapsed time (a solve's incumbent, bound and gap: ``SolveConfig.progress``)."""
    done = threading.Event()
    start = time.monotonic()
    latest = [""]

    def text() -> str:
        return f"{what}… {time.monotonic() - start:.0f} s" + (f" ({latest[0]})" if latest[0] else "")

    def show() -> None:
        if done.wait(PROGRESS_AFTER_S):
            return
        if not err.is_terminal:
            err.print(f"{what}…", highlight=False)
            return
        with err.status(text()) as status:
            while not done.wait(0.5):
                status.update(text())

    thread = threading.Thread(target=show, name="placer-progress", daemon=True)
    thread.start()
    try:
        yield lambda line: latest.__setitem__(0, line)
    finally:
        done.set()
        thread.join()


def choices(name: str, values: Iterable[str]) -> type[Enum]:
    """A str Enum of the library's own names (``min-cost`` → member ``min_cost``) for a Typer option."""
    return Enum(name, [(value.replace("-", "_"), value) for value in values], type=str)


def latest_from_database(chips: set[str] | None) -> dict[str, dict]:
    """``--profiles latest``: the newest stored profile per chip, from the folder ``placer profile chip``
    keeps its results in and the service's database (:func:`placer.profiles.store.latest_kept`); exit 2
    naming both and how to make one when neither holds a profile of these chips."""
    from placer.profiles.store import latest_kept  # only for --profiles latest

    return latest_kept(chips, database=_database)


def _database(chips: set[str] | None) -> dict[str, dict]:
    """The service database's newest profile per chip (its layer imported only now, so that a command
    never loads the service layer otherwise)."""
    try:
        loader = import_module("placer.service.profiles").latest_measured
    except ModuleNotFoundError as e:
        raise InputError(f"the database layer is not installed ({e.name})") from None
    return loader(chips)
