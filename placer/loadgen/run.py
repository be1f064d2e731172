"""``run_bench``: load an OpenAI-compatible endpoint with a scenario's workload; measured beside the
plan's promise and the simulator's figures for the same workload.

in:  a scenario (or its resolved ``Problem``), a :class:`BenchConfig` (URL, bounds, rate, …), optionally
     a plan, a request-log path, a progress callback and a stop event
out: :class:`BenchResult` (``data``: the Bench JSON — measured figures under the contract's keys, and
     with a plan ``predicted``, ``simulated`` and ``error``; ``outcomes``: each request's), and the
     request log written in the one format (``placer.records.request_log_line``)

The run: one ``GET /v1/models`` first (an endpoint that does not answer is :class:`EndpointError`, exit
1; its first model names the requests' ``model`` unless one is given), one request of one token that asks
whether it takes ``min_tokens``/``ignore_eos`` (``exact_output_lengths``), then each class session's prefix
once (warm-up, not measured), then the requests at their arrival times (open loop: Poisson at the rate,
or the trace's own times), at most ``max_concurrency`` in flight — an arrival that finds the cap full
waits for a slot and is counted in ``capped``; how late requests left against their arrival times
(the cap, or a client too busy to keep the schedule) is ``send_lag_p99_s`` and ``send_lag_max_s``. Sending stops at ``requests`` or ``duration_s``,
whichever comes first; a stop (Ctrl-C in the CLI) stops sending, cancels what is in flight (counted in
``cancelled``, not measured) and keeps everything measured so far (``interrupted: true``).

Safety: the client goes only where the user pointed it. Redirects are never followed (a 3xx is an
error naming where it pointed), proxies from the environment are not used, and http/https are the
only schemes.

One function, three faces: ``placer bench`` is this function's face; it holds no logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from placer.errors import InputError, PlacerError
from placer.loadgen import stats
from placer.loadgen.client import EXACT_LENGTH_FIELDS, Outcome, body_for, send
from placer.loadgen.prompts import UNITS, BenchRequest, PromptBuilder, class_requests, trace_requests, \
    warmup_requests
from placer.optimize import as_problem
from placer.pdd import PIPELINES
from placer.plancheck import check_plan
from placer.records import MAX_LATENCY_S, RequestRecord, request_log_line
from placer.sim import SimConfig, simulate
from placer.workload.trace import read_trace

MAX_REQUESTS = 100_000
MAX_DURATION_S = 86_400.0
MAX_RATE_RPS = 10_000.0
MAX_CONCURRENCY = 4096
DEFAULT_REQUESTS = 200
PREFLIGHT_TIMEOUT_S = 10.0
#: a pipeline the request log must name when the endpoint does not say (any engine that is not ours
#: prefills and decodes on one instance as far as the client can tell: aggregated)
UNKNOWN_PIPELINE = PIPELINES[-1]


class EndpointError(PlacerError):
    """The endpoint does not answer at all (exit 1): refused, unresolvable, timed out."""


@dataclass(frozen=True)
class BenchConfig:
    """What to send and how hard (validated on construction; each error names its option)."""

    url: str
    requests: int | None = None  # None: DEFAULT_REQUESTS, unless duration_s bounds the run
    duration_s: float | None = None
    rate_rps: float | None = None  # None: the scenario's arrival_rps
    seed: int = 0
    max_concurrency: int = 60  # under the 64 connections per client placer deploy and serve allow (placer.service.http)
    token: str | None = None
    model: str | None = None
    unit: str = "byte"
    sessions: int = 4
    warmup: bool = True
    timeout_s: float = 600.0
    trace: str | None = None
    trace_time_scale: float = 1.0
    simulate_requests: int = 5000
    nonce: str | None = None  # varies the prompts' text per run (None: drawn by run_bench)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"URL: must be http:// or https:// with a host, got {self.url!r}")
        try:
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise InputError(f"URL: bad port in {self.url!r}") from None
        if self.requests is not None and not 1 <= self.requests <= MAX_REQUESTS:
            raise InputError(f"--requests must be in [1, {MAX_REQUESTS:,}], got {self.requests}")
        if self.duration_s is not None and not 0 < self.duration_s <= MAX_DURATION_S:
            raise InputError(f"--duration must be in (0, {MAX_DURATION_S:g}] s, got {self.duration_s:g}")
        if self.rate_rps is not None and not 0 < self.rate_rps <= MAX_RATE_RPS:
            raise InputError(f"--rate must be in (0, {MAX_RATE_RPS:g}] req/s, got {self.rate_rps:g}")
        if not 1 <= self.max_concurrency <= MAX_CONCURRENCY:
            raise InputError(f"--max-concurrency must be in [1, {MAX_CONCURRENCY}], got {self.max_concurrency}")
        if self.unit not in UNITS:
            raise InputError(f"--unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if not 1 <= self.sessions <= 10_000:
            raise InputError(f"--sessions must be in [1, 10000], got {self.sessions}")
        if not 0 < self.timeout_s <= MAX_LATENCY_S:
            raise InputError(f"--timeout must be in (0, {MAX_LATENCY_S:g}] s, got {self.timeout_s:g}")
        if not 0 < self.trace_time_scale <= 1e6:
            raise InputError(f"--time-scale must be in (0, 1e6], got {self.trace_time_scale:g}")
        if not 100 <= self.simulate_requests <= 1_000_000:
            raise InputError(f"--simulate-requests must be in [100, 1000000], got {self.simulate_requests}")

    @property
    def count(self) -> int:
        if self.requests is not None:
            return self.requests
        return MAX_REQUESTS if self.duration_s is not None else DEFAULT_REQUESTS

    def endpoints(self) -> tuple[str, str]:
        """(models URL, completions URL): the URL may be the server's root, its ``/v1`` or the completions path."""
        root = self.url.rstrip("/")
        for tail in ("/v1/completions", "/v1"):
            if root.endswith(tail):
                root = root[: -len(tail)]
                break
        return f"{root}/v1/models", f"{root}/v1/completions"


@dataclass
class BenchResult:
    data: dict
    outcomes: list[Outcome] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(self.data, indent=2)


def run_bench(scenario, config: BenchConfig, plan=None, request_log: str | Path | None = None,
              progress: Callable[[int, int], None] | None = None, stop: threading.Event | None = None,
              handle_sigint: bool = False) -> BenchResult:
    """Send the workload, measure, compare (see the module docstring); ``progress(done, total)`` after
    each request, ``stop`` set → stop sending (``handle_sigint``: Ctrl-C sets it)."""
    problem = as_problem(scenario)
    if plan is not None:
        check_plan(problem, plan, other_scenario=True)  # a plan of another load is benched on purpose
    rate = config.rate_rps or problem.arrival_rps
    requests = _requests(problem, config, rate)
    if not requests:
        raise InputError("--duration: no request arrives within it at this rate; lengthen it or raise --rate")
    warm = warmup_requests(requests) if config.warmup else []
    log = _open_log(request_log)
    stop = stop or threading.Event()
    nonce = config.nonce or secrets.token_hex(4)
    try:
        models_url, url = config.endpoints()
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        model = config.model or _preflight(models_url, headers)
        exact = _takes_exact_lengths(url, model, headers)
        t_start = time.time()
        outcomes, cancelled, capped, lags = asyncio.run(_drive(config, url, model, headers, requests, warm, progress,
                                                         stop, handle_sigint, nonce, exact))
        wall_s = time.time() - t_start
        if log is not None:
            for o in outcomes:
                log.write(json.dumps(request_log_line(_record(o, config.seed))) + "\n")
    finally:
        if log is not None:
            log.close()
    data = _figures(problem, config, outcomes, rate, model, wall_s)
    data.update(interrupted=stop.is_set(), cancelled=cancelled, capped=capped, warmup_requests=len(warm),
                planned_requests=len(requests), prompt_nonce=nonce, exact_output_lengths=exact,
                send_lag_p99_s=_rounded(stats.quantile(lags, 0.99)), send_lag_max_s=_rounded(max(lags, default=None)))
    if plan is not None:
        try:
            _beside_plan(data, problem, plan, config, rate)
        except KeyboardInterrupt:  # Ctrl-C during the simulation: what was measured is kept
            data.update(interrupted=True, simulated=None, error={"vs_predicted": stats.relative_errors(
                data, data["predicted"]), "vs_simulated": {}})
    return BenchResult(data, outcomes)


def _requests(problem, config: BenchConfig, rate: float) -> list[BenchRequest]:
    if config.trace is not None:
        return list(trace_requests(read_trace(config.trace), config.count, config.duration_s,
                                   config.trace_time_scale))
    return list(class_requests(problem.classes, rate, config.seed, config.count, config.duration_s,
                               config.sessions))


def _open_log(path):
    if path is None:
        return None
    try:
        return open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by run_bench
    except OSError as e:
        raise InputError(f"--request-log: cannot write {str(path)!r}: {e.strerror}") from None


def _preflight(models_url: str, headers: dict) -> str | None:
    """The endpoint answers at all (else EndpointError); its first served model's id, if it lists one."""
    try:
        with httpx.Client(timeout=PREFLIGHT_TIMEOUT_S, follow_redirects=False, trust_env=False) as client:
            r = client.get(models_url, headers=headers)
    except httpx.HTTPError as e:
        raise EndpointError(f"cannot reach {models_url}: {type(e).__name__}: {e}") from None
    if r.status_code in (401, 403):
        raise InputError(f"--token: the endpoint refused {models_url} with HTTP {r.status_code}; give its token "
                         f"with --token or PLACER_EXECUTOR_TOKEN")
    try:
        listed = r.json().get("data") if r.status_code == 200 else None
        return listed[0]["id"] if listed and isinstance(listed[0].get("id"), str) else None
    except (ValueError, AttributeError, TypeError, KeyError):
        return None


def _takes_exact_lengths(url: str, model: str | None, headers: dict) -> bool:
    """Whether the endpoint accepts the fields that pin output lengths: one request of one token with them;
    a 400/422 whose detail names one of them means no (any other answer: yes, and the run will tell)."""
    probe = {"prompt": "probe", "max_tokens": 1, "min_tokens": 1, "ignore_eos": True, "temperature": 0.0}
    if model:
        probe["model"] = model
    try:
        with httpx.Client(timeout=PREFLIGHT_TIMEOUT_S, follow_redirects=False, trust_env=False) as client:
            r = client.post(url, json=probe, headers=headers)
    except httpx.HTTPError:
        return True
    return not (r.status_code in (400, 422) and any(f in r.text for f in EXACT_LENGTH_FIELDS))


async def _drive(config, url, model, headers, requests, warm, progress, stop, handle_sigint, nonce, exact=True):
    loop = asyncio.get_running_loop()
    if handle_sigint:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, stop.set)
    prompts = PromptBuilder(f"{config.seed}/{nonce}", config.unit)
    limits = httpx.Limits(max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency)
    timeout = httpx.Timeout(config.timeout_s, connect=PREFLIGHT_TIMEOUT_S)
    slots = asyncio.Semaphore(config.max_concurrency)
    outcomes: list[Outcome] = []
    lags: list[float] = []  # how late each request left against its arrival time (a busy client, the cap)
    capped = 0
    try:
        async with httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=False, trust_env=False) as client:

            async def one(req: BenchRequest, arrival_perf: float | None = None) -> Outcome:
                try:
                    return await send(client, url, req, body_for(req, prompts.text(req), model, exact), headers,
                                      arrival_perf)
                except Exception as e:  # noqa: BLE001 - never lose a request: an unexpected failure is its error
                    now = time.time()
                    return Outcome(req, now, now, error=f"client: {type(e).__name__}: {e}")
                finally:
                    slots.release()

            warming = []
            for req in warm:
                await slots.acquire()
                warming.append(asyncio.ensure_future(one(req)))
            await _settle(warming, stop)
            tasks: list[asyncio.Task] = []
            start = time.perf_counter()

            def done(task: asyncio.Task) -> None:
                if not task.cancelled() and task.exception() is None:
                    outcomes.append(task.result())
                    if progress is not None:
                        progress(len(outcomes), len(requests))

            for req in requests:
                if not await _until(start + req.arrival_s, stop):
                    break
                if slots.locked():
                    capped += 1
                await slots.acquire()
                if stop.is_set():
                    slots.release()
                    break
                lags.append(time.perf_counter() - start - req.arrival_s)
                task = asyncio.ensure_future(one(req, start + req.arrival_s))
                task.add_done_callback(done)
                tasks.append(task)
            cancelled = await _settle(tasks, stop)
    finally:
        if handle_sigint:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
    outcomes.sort(key=lambda o: o.request.index)
    return outcomes, cancelled, capped, lags


async def _until(t_perf: float, stop: threading.Event) -> bool:
    """Sleep until ``t_perf`` (perf_counter seconds); False if ``stop`` was set meanwhile."""
    while not stop.is_set():
        left = t_perf - time.perf_counter()
        if left <= 0:
            return True
        await asyncio.sleep(min(left, 0.05))
    return False


async def _settle(tasks: list, stop: threading.Event) -> int:
    """Wait for ``tasks``; once ``stop`` is set, cancel those still running. Returns how many were cancelled."""
    pending = set(tasks)
    cancelled = 0
    while pending:
        _, pending = await asyncio.wait(pending, timeout=0.05)
        if stop.is_set() and pending:
            for t in pending:
                t.cancel()
            cancelled += len(pending)
            await asyncio.gather(*pending, return_exceptions=True)
            pending = set()
    return cancelled


def _figures(problem, config: BenchConfig, outcomes: list[Outcome], rate: float, model, wall_s: float) -> dict:
    sent = [o.sent_unix_s - o.send_lag_s for o in outcomes]  # their arrival times
    ended = [o.ended_unix_s for o in outcomes if o.ended_unix_s is not None]
    span = (max(ended) - min(sent)) if sent and ended else 0.0
    figures = stats.measured(outcomes, problem.ttft_p90_s, problem.tpot_s, span)
    return {**figures, "scenario": problem.name, "url": config.url, "model": model,
            "offered_rps": None if config.trace else round(rate, 6),
            "workload": "trace" if config.trace else "classes", "unit": config.unit, "seed": config.seed,
            "sla": {"ttft_p90_s": problem.ttft_p90_s, "tpot_s": problem.tpot_s}, "wall_s": round(wall_s, 3)}


def _beside_plan(data: dict, problem, plan, config: BenchConfig, rate: float) -> None:
    """``predicted`` (the plan's metrics), ``simulated`` (``placer.sim`` on the same workload and rate) and
    each one's relative error against the measured figures."""
    data["predicted"] = stats.predicted(plan.metrics.model_dump())
    data["predicted_at_rps"] = plan.metrics.offered_rps or None
    sim_config = SimConfig(requests=config.simulate_requests, seed=config.seed,
                           load_rps=None if config.trace else rate,
                           workload="trace" if config.trace else "classes", trace=config.trace,
                           trace_time_scale=config.trace_time_scale,
                           # the bench sends a trace's requests at its own instants: the simulator replays those
                           spread_trace_bins=False)
    sim = simulate(problem, plan, sim_config).data
    data["simulated"] = stats.simulated(sim)
    data["error"] = {"vs_predicted": stats.relative_errors(data, data["predicted"]),
                     "vs_simulated": stats.relative_errors(data, data["simulated"])}


def _record(o: Outcome, seed: int) -> RequestRecord:
    """One request-log record of what the bench measured (the server's counts where it gave them)."""
    req = o.request
    n_in = o.prompt_tokens if o.prompt_tokens is not None and o.prompt_tokens > 0 else req.input_tokens
    hit = o.cached_tokens if o.cached_tokens is not None else req.hit_tokens
    extra = {"source": "placer bench", "hit_source": "server" if o.cached_tokens is not None else "bench",
             "e2e_s": o.e2e_s, "session": req.session}
    if o.pipeline not in PIPELINES:
        extra["pipeline_reported"] = False
    return RequestRecord(
        request_id=f"bench-{seed}-{req.index}", arrival_unix_s=o.sent_unix_s - o.send_lag_s, input_tokens=n_in,
        output_tokens=o.output_tokens, prefix_hit_tokens=max(0, min(hit, n_in)),
        pipeline=o.pipeline if o.pipeline in PIPELINES else UNKNOWN_PIPELINE,
        ttft_s=_latency(o.ttft_s), tpot_s=_latency(o.tpot_s), finish_reason=o.finish_reason,
        error=o.error, extra=extra, request_class=req.request_class)


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _latency(x: float | None) -> float | None:
    return None if x is None else min(max(x, 0.0), MAX_LATENCY_S)
