"""Matplotlib plumbing shared by every figure: Agg only, no pyplot, PNG/SVG out.

in:  a :class:`matplotlib.figure.Figure` built by :mod:`placer.report.diagram` or
     :mod:`placer.report.charts`
out: PNG bytes, standalone SVG text, inline SVG (for HTML), files on disk

Figures are made with ``Figure()`` directly (not ``pyplot``), so the dashboard can draw
from several request threads; a lock still serialises ``savefig``, whose font cache
and rcParams are process-wide. SVG keeps text as ``<text>`` (``svg.fonttype: none``)
so labels stay searchable in the report and assertable in a browser's DOM.
"""

from __future__ import annotations

import io
import re
import threading
from pathlib import Path

from placer.errors import InputError

_LOCK = threading.Lock()
PNG_DPI = 130


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise InputError("matplotlib is not installed: install placer[sim] to draw figures") from None
    matplotlib.use("Agg", force=False)
    return matplotlib


def new_figure(width_in: float, height_in: float, layout: str | None = None):
    """A blank figure (not registered with pyplot, so nothing leaks between calls)."""
    _matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), layout=layout)


def _save(fig, fmt: str, salt: str = "placer") -> bytes:
    matplotlib = _matplotlib()
    buf = io.BytesIO()
    rc = {"svg.fonttype": "none", "svg.hashsalt": salt, "svg.image_inline": True}
    with _LOCK, matplotlib.rc_context(rc):
        fig.savefig(buf, format=fmt, dpi=PNG_DPI, metadata={"Date": None} if fmt == "svg" else None)
    return buf.getvalue()


def png_bytes(fig) -> bytes:
    return _save(fig, "png")


def svg_text(fig, salt: str = "placer") -> str:
    """The figure as a standalone SVG document."""
    return _save(fig, "svg", salt).decode("utf-8")


_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_SIZE = re.compile(r'<svg([^>]*?)\swidth="[^"]*"\s+height="[^"]*"')


def inline_svg(fig, salt: str, css_class: str = "figure") -> str:
    """SVG markup to paste into HTML: no XML prolog, DOCTYPE or metadata; scales to its box.

    ``salt`` makes matplotlib's generated ids (clip paths) unique per figure, so two
    figures on one page never share an id.
    """
    text = _METADATA.sub("", _PROLOG.sub("", svg_text(fig, salt), count=1))
    text = _SIZE.sub(r'<svg\1 width="100%"', text, count=1)
    return text.replace("<svg", f'<svg class="{css_class}" role="img"', 1)


def close(fig) -> None:
    """Drop a figure's artists (Figure objects are not tracked by pyplot; this frees memory early)."""
    fig.clear()


def write(fig, directory: Path, stem: str) -> list[Path]:
    """``<stem>.png`` and ``<stem>.svg`` in ``directory``; InputError if it cannot be written."""
    paths = [directory / f"{stem}.png", directory / f"{stem}.svg"]
    try:
        paths[0].write_bytes(png_bytes(fig))
        paths[1].write_text(svg_text(fig, stem))
    except OSError as err:
        raise InputError(f"--out: cannot write {str(paths[0].parent)!r}: {err.strerror}") from None
    return paths


def safe_id(text: str) -> str:
    """``text`` reduced to characters that are safe in an XML id."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def spread_labels(fig, texts: list, step_pt: float = 9.0, tries: int = 14, along: dict | None = None) -> None:
    """Move annotations (placed with ``textcoords="offset points"``) until none overlaps one placed
    before it and each stays inside its axes; call after the layout is final (``tight_layout``).
    A text keyed in ``along`` tries those anchor points (data coordinates, e.g. down a line it
    labels) in turn; any other is nudged up or down in turns of ``step_pt``. Earlier texts are
    placed first; a text that finds no free place keeps its own."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = (fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)).get_renderer()
    along = along or {}
    placed = []
    for text in texts:
        home_xy, (dx, dy) = text.xy, text.xyann
        frame = text.axes.get_window_extent(renderer) if text.axes is not None else None
        tries_at = [(xy, (dx, dy)) for xy in along[text]] if text in along else \
            [(home_xy, (dx, dy + step_pt * ((k + 1) // 2) * (-1 if k % 2 else 1))) for k in range(tries)]
        for xy, offset in tries_at:  # 0, +1, -1, +2, -2 … steps, or the points along
            text.xy, text.xyann = xy, offset
            box = text.get_window_extent(renderer)
            inside = frame is None or (box.y0 >= frame.y0 and box.y1 <= frame.y1 and box.x0 >= frame.x0)
            if inside and not any(box.padded(4).overlaps(other) for other in placed):
                break
        else:
            text.xy, text.xyann = home_xy, (dx, dy)
        placed.append(text.get_window_extent(renderer))
