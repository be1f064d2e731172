"""``placer bench URL --scenario S [--plan P]``: a thin face over :func:`placer.loadgen.run_bench`.

in:  the endpoint's URL, the scenario (and plan) files, the bounds and rate
out: a table of the measured figures beside the plan's promise and the simulator's, with the error of
     each (or the Bench JSON with ``--json``); the request log with ``--request-log``; a progress bar
     on stderr in a terminal. Exit codes: 2 bad input, 1 an endpoint that does not answer.

Mounted lazily by :mod:`placer.cli.app`: this module is imported only when ``bench`` runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from placer.cli.output import err, out
from placer.cli.output import fail as _fail
from placer.errors import InputError, PlacerError
from placer.loadgen import BenchConfig, run_bench
from placer.loadgen.stats import KEYS
from placer.plan import load_plan
from placer.settings import Settings
from placer.specs import load_scenario


def bench(
    url: Annotated[str, typer.Argument(help="The endpoint: its root (http://127.0.0.1:8000), its /v1, or its "
                                       "/v1/completions. Only http and https; redirects are never followed.",
                                       show_default=False)],
    scenario: Annotated[Path, typer.Option("--scenario", help="Scenario whose workload (classes, rate) is sent.",
                                           show_default=False)],
    plan_file: Annotated[Path | None, typer.Option("--plan", help="Plan whose promise (and simulation) the "
                                                   "measured figures stand beside.")] = None,
    requests: Annotated[int | None, typer.Option("--requests", help="Requests to send (at most 100,000; default "
                                                 "200 unless --duration).")] = None,
    duration: Annotated[float | None, typer.Option("--duration", help="Stop sending after this many seconds "
                                                   "(at most 86,400).")] = None,
    rate: Annotated[float | None, typer.Option("--rate", help="Poisson arrivals per second (default: the "
                                               "scenario's arrival_rps).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the Bench JSON instead of the table.")] = False,
    request_log: Annotated[Path | None, typer.Option("--request-log", help="Write each measured request here "
                                                     "(JSON Lines, the request-log format `workload fit` reads).")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Replay this JSONL trace (its lengths, prefix "
                                               "blocks or hit rates, and times) instead of the classes.")] = None,
    time_scale: Annotated[float, typer.Option("--time-scale", help="Trace replay speed-up.")] = 1.0,
    token: Annotated[str | None, typer.Option("--token", help="Bearer token (default: PLACER_EXECUTOR_TOKEN).",
                                              show_default=False)] = None,
    model: Annotated[str | None, typer.Option("--model", help="The `model` to ask for (default: the first the "
                                              "endpoint lists at /v1/models).")] = None,
    max_concurrency: Annotated[int, typer.Option("--max-concurrency", help="Requests in flight at most; an "
                                                 "arrival beyond waits (counted as capped). placer deploy "
                                                 "refuses more than 64 connections per client.")] = 60,
    unit: Annotated[str, typer.Option("--unit", help="What one prompt token is: byte (the executor's byte "
                                      "tokenizer) or word (a space-led common word: BPE tokenizers).")] = "byte",
    sessions: Annotated[int, typer.Option("--sessions", help="Sessions per class: each shares one prefix of the "
                                          "class's hit rate.")] = 4,
    warmup: Annotated[bool, typer.Option("--warmup/--no-warmup", help="Send each session's prefix once before "
                                         "measuring.")] = True,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of arrivals, classes and prompts.")] = 0,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one request may take.")] = 600.0,
    simulate_requests: Annotated[int, typer.Option("--simulate-requests", help="Requests the simulator replays "
                                                   "beside the bench (with --plan).")] = 5000,
) -> None:
    """Load an OpenAI-compatible endpoint with a scenario's workload; measured beside the plan's promise.

    Streams every request (TTFT, TPOT, end-to-end measured per request); Ctrl-C stops sending and keeps
    what was measured."""
    bar = None
    try:
        config = BenchConfig(url=url, requests=requests, duration_s=duration, rate_rps=rate, seed=seed,
                             max_concurrency=max_concurrency, token=token or _env_token(), model=model, unit=unit,
                             sessions=sessions, warmup=warmup, timeout_s=timeout,
                             trace=str(trace) if trace else None, trace_time_scale=time_scale,
                             simulate_requests=simulate_requests)
        loaded = load_scenario(scenario)
        plan = load_plan(plan_file) if plan_file is not None else None
        bar, update = _progress()
        result = run_bench(loaded, config, plan=plan, request_log=request_log, progress=update,
                           handle_sigint=True)
    except PlacerError as e:
        _fail(e)
    finally:
        if bar is not None:
            bar.stop()
    data = result.data
    if data["interrupted"]:
        err.print(f"interrupted: kept the {data['requests']} requests measured; {data['cancelled']} in flight "
                  "were cancelled", highlight=False, markup=False)
    if not data.get("exact_output_lengths", True):
        err.print("note: the endpoint refuses min_tokens / ignore_eos, so requests were sent without them and may "
                  "end early at an end-of-sequence token (output_tokens says how many came)", highlight=False,
                  markup=False)
    if json_out:
        print(json.dumps(data, indent=2))
    else:
        out.print(bench_view(data), highlight=False)
    if request_log is not None:
        err.print(f"wrote {data['requests']} requests to {request_log}", highlight=False, markup=False)


def _env_token() -> str | None:
    try:
        return Settings.from_env().executor_token
    except ValidationError as e:
        first = e.errors()[0]
        raise InputError(f"environment: {'.'.join(map(str, first['loc'])) or 'settings'}: {first['msg']} "
                         "(the token is read from PLACER_EXECUTOR_TOKEN)") from None


def _progress():
    """A progress bar on stderr in a terminal (stdout stays clean for --json); None otherwise."""
    if not err.is_terminal:
        return None, None
    bar = Progress(TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                   transient=True)
    task = bar.add_task("bench", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


def _fmt(key: str, value) -> str:
    if value is None:
        return "–"
    if key in ("requests", "errors"):
        return f"{value:,}"
    if key == "sla_attainment":
        return f"{100 * value:.1f} %"
    if key.endswith("_rps"):
        return f"{value:.3g}"
    return f"{value:.4g}"


def _err(errors: dict, key: str) -> str:
    return f"{100 * errors[key]:+.0f} %" if key in errors else ""


def bench_view(data: dict) -> Table:
    """The measured figures, and with a plan the promise and the simulation beside them with each error."""
    planned = "predicted" in data
    rate = data.get("offered_rps")
    title = (f"{data['scenario']}: {data['requests']:,} requests to {data['url']}"
             + (f" at {rate:g} req/s offered" if rate else "") + (" (interrupted)" if data["interrupted"] else ""))
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("measured", justify="right")
    if planned:
        for col in ("predicted", "error", "simulated", "error "):
            table.add_column(col, justify="right")
    errors = data.get("error", {})
    for key in KEYS:
        row = [key, _fmt(key, data.get(key))]
        if planned:
            row += [_fmt(key, data["predicted"].get(key)), _err(errors.get("vs_predicted", {}), key),
                    _fmt(key, (data["simulated"] or {}).get(key)), _err(errors.get("vs_simulated", {}), key)]
        table.add_row(*row)
    notes = []
    if data["errors"]:
        notes.append("errors: " + ", ".join(f"{k} × {n}" for k, n in data["error_kinds"].items()))
    if data.get("capped"):
        notes.append(f"{data['capped']} arrivals waited for a slot (--max-concurrency)")
    lag = data.get("send_lag_p99_s")
    if lag is not None and lag > 0.05:
        notes.append(f"1 % of requests left over {lag:.2g} s after their arrival time (the client fell behind)")
    at = data.get("predicted_at_rps")
    if planned and at and rate and abs(at - rate) > 1e-9 * max(at, rate):
        notes.append(f"the plan's promise is at {at:g} req/s; the bench offered {rate:g}")
    if notes:
        table.caption = "; ".join(notes)
        table.caption_justify = "left"
    return table
