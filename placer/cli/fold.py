"""A table that folds to a vertical layout when the terminal is too narrow (rich).

in:  a title, column headers and rows of plain strings (user names included: never
     parsed as markup, so a class named ``[/]`` prints as itself)
out: a rich renderable: the usual table when its natural width fits the console;
     otherwise one block per row, ``header: value`` lines under the row's first cell —
     nothing is cut to "…".
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def plain(value: object) -> Text:
    """``value`` as text that rich never parses as markup."""
    return value if isinstance(value, Text) else Text(str(value))


class Fold:
    """A table of plain strings that folds on narrow consoles (see the module docstring).

    ``right``: the headers whose column is right-aligned in the wide layout.
    ``show_header=False`` makes a two-column key/value table (a metric list), which
    folds to ``key: value`` lines.
    """

    def __init__(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[object]],
                 right: Sequence[str] = (), show_header: bool = True) -> None:
        self.title, self.headers, self.rows = title, list(headers), [list(r) for r in rows]
        self.right, self.show_header = set(right), show_header

    def wide(self) -> Table:
        t = Table(title=plain(self.title), show_header=self.show_header)
        for h in self.headers:
            t.add_column(plain(h), justify="right" if h in self.right else "left", no_wrap=True)
        for r in self.rows:
            t.add_row(*(plain(c) for c in r))
        return t

    def folded(self) -> Group:
        parts: list[Text] = [Text(self.title, style="bold underline")]
        for r in self.rows:
            if not self.show_header:
                parts.append(Text.assemble((str(r[0]), "bold"), ": ", plain(r[1])))
                continue
            parts.append(Text.assemble((str(r[0]), "bold")))
            for h, c in zip(self.headers[1:], r[1:]):
                parts.append(Text.assemble("  ", (h.replace("\n", " "), "dim"), ": ", plain(c)))
        return Group(*parts)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.wide()
        needed = Measurement.get(console, options.update(width=10_000), table).maximum
        yield table if needed <= options.max_width else self.folded()
