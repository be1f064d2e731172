"""Knobs of one simulation run (frozen; validated on construction).

Defaults replay the plan at its own load with Poisson arrivals and i.i.d. requests of
the scenario's classes — the setting whose predictions :func:`placer.evaluate.analyze`
makes — so a default run is also the agreement check.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.errors import InputError
from placer.pdd import HANDOFF_MODES
from placer.sim.runtime import ExecutorRuntime
from placer.workload.arrivals import Burstiness

WORKLOADS = ("classes", "agentic", "trace")
DISPATCH = ("random", "least-work")


@dataclass(frozen=True)
class SimConfig:
    requests: int = 20_000
    """Requests to replay (a trace: at most this many of its lines)."""
    seed: int = 0
    warmup_fraction: float = 0.05
    """Leading share of requests left out of the latency and goodput figures (empty-system start)."""
    load_rps: float | None = None
    """Arrival rate; None = the plan's carried load (the sum of its routes)."""
    workload: str = "classes"
    """classes: i.i.d. requests of the classes · agentic: multi-turn sessions with real caches · trace."""
    trace: str | None = None
    trace_time_scale: float = 1.0
    """Trace replay speed-up: timestamps are divided by this."""
    spread_trace_bins: bool = True
    """A trace whose timestamps are binned (counts per bin, e.g. the Mooncake traces' 3 s): each request at
    a seeded uniform time within its bin (placer.sim.sources.trace_bin_s); False: at the bin's instant."""
    arrivals: str = "poisson"
    """poisson or bursty (classes and agentic workloads). Poisson draws of the classes follow the scenario's
    ``workload.arrival_cv2`` (a renewal process; 1: Poisson); bursty sets its own variability and is refused
    where that cv² is not 1 (placer.sim.sources.work_items)."""
    burstiness: Burstiness | None = None
    mean_turns: float = 20.0
    think_s: float = 10.0
    class_persistence: float = 0.95
    """Agentic sessions: chance a turn keeps the previous turn's class (else drawn by share)."""
    dispatch: str = "random"
    """Instance choice inside a pool: random (the planner's assumption) or least-work."""
    drc_lag: float = 0.0
    """Decode-side cache hit = P-side hit − drc_lag (workloads with hit rates; hash_ids use real caches)."""
    route_by: str = "p-hit"
    """Class a request by P's prefix hit (p-hit, as PDD's router does) or by what MD's cache holds (drc-hit)."""
    drc_capacity_fraction: float = 4.0
    """Decode-side radix cache size per MD instance, as a multiple of its HBM KV room (above 1: a
    host-memory tier holds the rest, as hierarchical caches do); hash_ids workloads."""
    prefix_cache_blocks: int | None = None
    """P-side prefix store size in 512-token blocks (hash_ids workloads); None = unbounded."""
    handoff_mode: str | None = None
    """Override the plan's handoff mode (adaptive, one-shot, catch-up)."""
    catch_up_threshold_tokens: int | None = None
    """Override the plan's adaptive threshold (pending RLD tokens above it → catch-up)."""
    batch_tail_chunks: bool = False
    """Whether P may batch the tail chunk of a chunked request with other requests."""
    series_bins: int = 60
    runtime: ExecutorRuntime | None = None
    """Replay the executor as it serves on one host (placer.sim.runtime); None = the planner's deployment."""

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise InputError(f"requests must be >= 1, got {self.requests}")
        if not 0 <= self.warmup_fraction < 1:
            raise InputError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.load_rps is not None and not self.load_rps > 0:
            raise InputError(f"load_rps must be > 0, got {self.load_rps}")
        if self.workload not in WORKLOADS:
            raise InputError(f"workload: unknown {self.workload!r}; choose one of {', '.join(WORKLOADS)}")
        if self.workload == "trace" and not self.trace:
            raise InputError("workload 'trace' needs a trace file")
        if self.trace_time_scale <= 0:
            raise InputError(f"trace_time_scale must be > 0, got {self.trace_time_scale}")
        if self.arrivals not in ("poisson", "bursty"):
            raise InputError(f"arrivals: unknown {self.arrivals!r}; choose poisson or bursty")
        if self.dispatch not in DISPATCH:
            raise InputError(f"dispatch: unknown {self.dispatch!r}; choose one of {', '.join(DISPATCH)}")
        if not 0 <= self.drc_lag <= 1:
            raise InputError(f"drc_lag must be in [0, 1], got {self.drc_lag}")
        if self.route_by not in ("p-hit", "drc-hit"):
            raise InputError(f"route_by: unknown {self.route_by!r}; choose p-hit or drc-hit")
        if not 0 < self.drc_capacity_fraction <= 1000:
            raise InputError(f"drc_capacity_fraction must be in (0, 1000], got {self.drc_capacity_fraction}")
        if self.prefix_cache_blocks is not None and self.prefix_cache_blocks < 1:
            raise InputError(f"prefix_cache_blocks must be >= 1, got {self.prefix_cache_blocks}")
        if self.handoff_mode is not None and self.handoff_mode not in HANDOFF_MODES:
            raise InputError(f"handoff_mode: unknown {self.handoff_mode!r}; choose one of {', '.join(HANDOFF_MODES)}")
        if self.catch_up_threshold_tokens is not None and self.catch_up_threshold_tokens < 0:
            raise InputError(f"catch_up_threshold_tokens must be >= 0, got {self.catch_up_threshold_tokens}")
        if self.runtime is not None and not isinstance(self.runtime, ExecutorRuntime):
            raise InputError(f"runtime: expected an ExecutorRuntime, got {type(self.runtime).__name__}")
        if self.series_bins < 4:
            raise InputError(f"series_bins must be >= 4, got {self.series_bins}")
