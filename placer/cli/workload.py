"""``placer workload fit``: a trace bucketed into request classes, the ``workload:`` section of a scenario.

in:  a JSONL trace (timestamp, input_length, output_length, hit_rate or hash_ids)
out: YAML on stdout (and ``--out``): :func:`placer.workload.fit.fit_classes` with the trace's ``arrival_rps``
     and ``arrival_cv2`` (:func:`placer.workload.fit.trace_arrival_cv2`); ``--window`` fits each window of the
     trace (:func:`placer.replan.timeline.trace_windows`), as a replanning job fits its window

Mounted lazily by :mod:`placer.cli.app` as the ``workload`` group (``workload_app``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from placer.cli.output import err
from placer.cli.output import fail as _fail
from placer.errors import InputError, PlacerError
from placer.workload.fit import fit_classes, trace_arrival_cv2, trace_arrival_rps, window_arrival_cv2
from placer.workload.trace import read_trace, with_hit_rates

workload_app = typer.Typer(help="Workload traces: fit request classes.", no_args_is_help=True)


@workload_app.command("fit")
def workload_fit(
    trace: Annotated[Path, typer.Argument(help="JSONL trace (timestamp, input_length, output_length, "
                                          "hit_rate or hash_ids).", show_default=False)],
    out_path: Annotated[Path | None, typer.Option("--out", help="Also write the classes YAML here.")] = None,
    min_share: Annotated[float, typer.Option("--min-share", help="Buckets under this share of requests "
                                             "merge into a neighbour.")] = 0.02,
    cache_tokens: Annotated[int | None, typer.Option(
        "--prefix-cache-tokens", min=1, help="Hit rates as an LRU prefix cache of this many tokens realises them "
        "(the planned P capacity's cache); default: a cache that never evicts, the trace's ideal (an upper bound).",
        show_default=False)] = None,
    window: Annotated[str | None, typer.Option(
        "--window", help="Fit each window of this duration from the trace's first request (e.g. 1h): one "
        "workload section per window, as a replanning job fits its window.", show_default=False)] = None,
) -> None:
    """Bucket a trace into request classes: the `workload:` section of a scenario."""
    if window is not None:
        _fit_windows(trace, window, out_path)
        return
    try:
        classes = fit_classes(with_hit_rates(read_trace(trace), cache_tokens), min_share=min_share)
        try:
            rate = trace_arrival_rps(trace)
        except InputError:
            rate = None
        try:
            cv2, measure = trace_arrival_cv2(trace)
        except InputError:
            cv2 = measure = None
    except PlacerError as e:
        _fail(e)
    if cv2 is not None:
        err.print(f"arrival_cv2 {cv2:.3g} from the trace's {measure}", highlight=False, markup=False, soft_wrap=True)
    body = {"workload": {**({"arrival_rps": round(rate, 6)} if rate else {}),
                         **({"arrival_cv2": round(cv2, 4)} if cv2 is not None and cv2 > 0 else {}),
                         **({"prefix_cache_tokens": cache_tokens} if cache_tokens else {}),
                         "classes": [c.model_dump() for c in classes]}}
    text = f"# classes fitted from {trace.name}\n" + yaml.safe_dump(body, sort_keys=False)
    _emit(text, out_path)


def _emit(text: str, out_path: Path | None) -> None:
    """The fitted classes as YAML on stdout, and in --out if given."""
    if out_path is not None:
        try:
            out_path.write_text(text)
        except OSError as e:
            _fail(InputError(f"--out: cannot write {str(out_path)!r}: {e.strerror}"))
    print(text, end="")


def _fit_windows(trace: Path, window: str, out_path: Path | None) -> None:
    """``workload fit --window``: each window's arrival rate and classes (YAML list)."""
    from placer.replan.timeline import parse_duration, trace_windows

    try:
        width_s = parse_duration(window, "--window")
        rows = trace_windows(trace, width_s)
        cv2 = window_arrival_cv2(trace, width_s)
    except PlacerError as e:
        _fail(e)
    body = {"windows": [{"start_s": start, "arrival_rps": round(rate, 6),
                         **({"arrival_cv2": round(cv2[k], 4)} if k in cv2 else {}),
                         **({"classes": [c.model_dump() for c in classes]} if classes else
                            {"note": "too few requests to fit"})} for k, (start, rate, classes) in enumerate(rows)]}
    text = f"# classes fitted per {window} window of {trace.name}\n" + yaml.safe_dump(body, sort_keys=False)
    _emit(text, out_path)
