"""What the executor's runtime adds to a request's first token: one rule, priced by the planner, drawn by the simulator.

in:  an :class:`~placer.executor_runtime.ExecutorRuntime` (measured on the serving host), a route's shape: its
     prefill seconds, the KV bytes its first-token decoder imports, the line it crosses (RTT, jitter, rate) or
     none, the streaming decoder's mean batch and step
out: :func:`first_token_added_s` — the expected seconds the executor adds to the route's first token beyond the
     planner's idealised move (:meth:`placer.flows.Route.executor_s` puts them in the deterministic TTFT, so the
     MILP, `evaluate` and `validate` all price them); the pieces it sums, which the simulator's line draws over
     (:class:`placer.sim.links.WanLink`): :func:`frame_offsets_s`, :func:`tokens_offsets_s` (which messages a
     late one lands behind), :func:`expected_latest_s` (their expected in-order release); :func:`pull_wait_s`,
     :func:`step_wait_s`, :func:`message_turn_s`; :func:`stream_step_s` — what a decode step carries per sequence
     beyond its forward (its Tokens message: the decoders' step in the MILP's design and `evaluate`'s batch law)

The terms, each the simulator's charge on the executor's runtime (``SimConfig.runtime``) at an idle host:

* the router's orders leave after the request's path overhead (``path_overhead_s``; ``events/arrival.py``);
* P exports the KV for its consumer and the decoder imports it before it streams t0 (``export_s``,
  ``import_s``; ``events/kv.py``, ``events/decode.py``); inside a datacenter that export and import *are*
  the move (the in-process transport hands the payload over): they replace the planner's RDMA copy;
* across a line, the KV leaves P only once the decoder's pull has come back: the order's one way and the
  pull's, each through the socket path (:func:`pull_wait_s`); each of the KV's frames lands one way plus a
  normal jitter later, released in order (a frame waits for the slowest of the frames before it within
  reach: :func:`expected_latest_s` over :func:`frame_offsets_s`), and the first token's message back to the
  router waits, in order, behind the decoder's Tokens messages of its last steps (:func:`tokens_offsets_s`);
  the KV and that message each pay the socket path's latency (``wan_message_s``);
* a decoder handles a message (the order, the KV) between two of its steps: it waits for the step in
  progress (:func:`step_wait_s`, where the decoder's batch is settled: `evaluate`).

The order also waits its turn among the KV transfers on the line (:func:`message_turn_s`, at the line's
utilization). The CPU terms are slowed by the host's one-thread ``slowdown``. Dynamic terms stay out: the
host's, the cores shared with busy engine threads (``Host``'s speedup and interference,
``wan_latency_beside_s``), which the plan cannot know per request; and a KV queued behind a busy connection's
buffered bytes (``wan_hol_bytes``: the line's slowdown of a transfer is the TTFT tail's, :mod:`placer.ttft_tail`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from placer.executor_runtime import ExecutorRuntime

#: How far back (in one-way jitter standard deviations, past one way) a message may have left and still land
#: after a later one: beyond it the chance is below 3e-7.
REACH_SIGMAS = 5.0
_GRID = 600  # integration points of the expected latest landing (Simpson's rule)


def reach_s(rtt_s: float, jitter_s: float) -> float:
    """How much earlier than a message another may leave and still land after it."""
    return rtt_s / 2 + REACH_SIGMAS * jitter_s


def frame_offsets_s(n_bytes: float, frame_bytes: float, gap_s: float, reach: float) -> Iterator[float]:
    """How long before a KV's last frame each earlier frame of it left, latest first: the frames cross
    ``gap_s`` apart; those further back than ``reach`` cannot land after the last. ``n_bytes`` infinite: the
    connection's frames go on (others of it cross before)."""
    frames = -(-n_bytes // frame_bytes)  # whole frames (inf // x is nan: compared below as never reached)
    if not math.isfinite(n_bytes):
        frames = math.inf
    k = 1
    while k < frames and k * gap_s < reach:
        yield k * gap_s
        k += 1


def tokens_offsets_s(first_ago_s: float, step_s: float, batch: int, reach: float) -> Iterator[float]:
    """How long before the first token the decoder's earlier Tokens messages left: ``batch`` of them (one per
    sequence) after each of its last steps, the latest ``first_ago_s`` before, one step apart."""
    ago = first_ago_s
    while ago < reach:
        for _ in range(batch):
            yield ago
        if step_s <= 0:
            return
        ago += step_s


def expected_latest_s(one_way_s: float, jitter_s: float, offsets: Iterable[float]) -> float:
    """E[max(D₀, maxᵢ Dᵢ − oᵢ)]: when the last of in-order messages is released, each landing one way plus a
    normal jitter (D = max(one way + N(0, σ²), 0), independent) after it left, message i ``oᵢ`` seconds
    before the last. Normal order statistics: P(max ≤ y) = Πᵢ G(y + oᵢ), G the clamped normal's law,
    integrated (E[M] = ∫₀^∞ 1 − P(M ≤ y) dy, M ≥ 0)."""
    if jitter_s <= 0:
        return max(one_way_s, 0.0)
    counts = Counter(round(o, 9) for o in offsets)
    return _latest(one_way_s, jitter_s, tuple(sorted(counts.items())))


@lru_cache(maxsize=4096)
def _latest(h: float, sigma: float, offsets: tuple[tuple[float, int], ...]) -> float:
    top = h + 9 * sigma
    if top <= 0:
        return 0.0
    step = top / _GRID
    root2 = math.sqrt(2) * sigma

    def survival(y: float) -> float:
        cdf = 0.5 * (1 + math.erf((y - h) / root2)) if y >= 0 else 0.0
        for o, n in offsets:
            z = y + o
            cdf *= (0.5 * (1 + math.erf((z - h) / root2))) ** n if z >= 0 else 0.0
        return 1.0 - cdf

    total = survival(0.0) + survival(top)
    for i in range(1, _GRID):
        total += (4 if i % 2 else 2) * survival(i * step)
    return total * step / 3


def pull_wait_s(prefill_s: float, pull_s: float, jitter_s: float) -> float:
    """Expected seconds a KV waits at P, its prefill done, for the decoder's pull across the line: the order
    and the pull each cross one way with a normal jitter, X ~ N(``pull_s``, 2σ²) after the prefill began
    (``pull_s``: the round trip, both messages' socket path and the decoder's wait for its step in progress);
    E[(X − prefill)⁺] (a prefill that waited in P's queue waits less: the unqueued request's wait, the
    deterministic part's)."""
    mean = pull_s - prefill_s
    sd = math.sqrt(2) * jitter_s
    if sd <= 0:
        return max(mean, 0.0)
    z = mean / sd
    return mean * 0.5 * (1 + math.erf(z / math.sqrt(2))) + sd * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def step_wait_s(decoder: tuple[float, float] | None) -> float:
    """Expected seconds a message waits at a decoder for the step in progress (the executor's worker handles
    its inbox between two steps: ``roles/common.py: run_once``): with a mean batch b held (requests in the
    batch are independent, M/G/∞: stepping with probability 1 − e^(−b)), half a step when it steps."""
    if decoder is None or decoder[0] <= 0 or decoder[1] <= 0:
        return 0.0
    batch, step = decoder
    return (1.0 - math.exp(-batch)) * step / 2


def message_turn_s(frame_bytes: float, rate: float, utilization: float) -> float:
    """Expected seconds a small message (the router's order) waits for its turn on a line the KV transfers
    share: the relay serialises one frame at a time, round robin (``WanLink.message_s``: half the frame on the
    line and one frame of each of the n transfers in flight); n in flight is geometric under processor sharing,
    P(n ≥ k) = ρᵏ: E[(½ + n)·1{n > 0}] = ρ/2 + ρ/(1 − ρ) frames."""
    rho = min(max(utilization, 0.0), 0.99)
    return (rho / 2 + rho / (1 - rho)) * frame_bytes / rate if frame_bytes > 0 and rate > 0 else 0.0


def first_token_added_s(rt: ExecutorRuntime, prefill_s: float, kv_bytes: float,
                        line: tuple[float, float, float] | None = None,
                        decoder: tuple[float, float] | None = None, line_utilization: float = 0.0) -> float:
    """Expected seconds the executor adds to a request's first token beyond the planner's idealised route,
    the move itself excepted inside a datacenter (the caller drops its RDMA copy: the export and import
    counted here are that move). ``kv_bytes``: what the first-token decoder imports; ``line``: (RTT s,
    one-way jitter σ s, bytes/s) where it is across a line, None inside a datacenter; ``decoder``: (mean batch,
    step s) of that decoder, whose Tokens messages the first token follows back to the router (None: its own
    message alone and no step to wait for: the MILP's view before the batch is settled); ``line_utilization``:
    the line's, where the order waits its turn among the transfers (:func:`message_turn_s`); the KV's own
    frames as on an unloaded line (its slowdown by the others is the TTFT tail's)."""
    # the KV waits at the decoder for its step in progress, then is imported (events/decode.py, relay.py)
    step = step_wait_s(decoder)
    cpu = rt.slowdown * (rt.path_overhead_s() + rt.export_s(kv_bytes) + rt.import_s(kv_bytes))
    if line is None:
        return cpu + step
    rtt, jitter, rate = line
    one_way, message = rtt / 2, rt.wan_message_s(0.0)
    reach = reach_s(rtt, jitter)
    # the order waits for the decoder's step too before it pulls (events/kv.py: _ev_order_at)
    turn = message_turn_s(rt.wan_frame_bytes, rate, line_utilization)
    added = cpu + step + pull_wait_s(prefill_s, rtt + 2 * message + step + turn, jitter) + 2 * message
    added += kv_bytes * rt.wan_latency_s_per_byte
    if rt.wan_frame_bytes > 0:  # the KV's frames released in order (WanLink._kv_release)
        frames = frame_offsets_s(kv_bytes, rt.wan_frame_bytes, rt.wan_frame_bytes / rate, reach)
        added += expected_latest_s(one_way, jitter, frames) - one_way
    # the first token's message back, in order behind the decoder's last Tokens messages (WanLink._t0_back)
    added += tokens_excess_s(one_way, jitter, rt.import_s(kv_bytes), decoder, reach)
    return added


def tokens_excess_s(one_way_s: float, jitter_s: float, first_ago_s: float, decoder: tuple[float, float] | None,
                    reach: float) -> float:
    """The first token's expected lateness behind the decoder's Tokens messages, over its own one way: at a
    mean batch b between two whole batches, the two's excess weighted linearly (b = 0: an idle decoder)."""
    own = expected_latest_s(one_way_s, jitter_s, ()) - one_way_s
    if decoder is None or decoder[0] <= 0 or decoder[1] <= 0:
        return own
    batch, step = decoder
    lo = math.floor(batch)

    def at(b: int) -> float:
        return expected_latest_s(one_way_s, jitter_s, tokens_offsets_s(first_ago_s, step, b, reach)) - one_way_s

    return at(lo) + (batch - lo) * (at(lo + 1) - at(lo)) if batch > lo else at(lo)


def stream_step_s(rt: ExecutorRuntime | None) -> float:
    """Seconds a decode step takes per sequence in it beyond the forward: the executor's worker sends each
    decoding request its Tokens message after every step (``token_stream_s`` CPU, × the host's one-thread
    ``slowdown``: the simulator's ``DecodeInstance._step_s`` charge at an idle host); 0 without a runtime."""
    return rt.token_stream_s * rt.slowdown if rt is not None else 0.0
