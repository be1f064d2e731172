"""The served forwards, grouped by what ran beside them, against what the simulator charges them.

in:  bench_serve's ``forwards_served`` (per kind, rows of [size, context, thread CPU s, wall s,
     began s, instance]: the engines' ``forward_log``), the profile's table, a setup's
     :class:`~placer.sim.runtime.ExecutorRuntime` (its probes around the serving)
out: per (kind, the kinds of forward the other instances were running): how many forwards, their
     wall seconds and thread CPU seconds ÷ the table's for the same shapes, and the factor
     :class:`~placer.sim.runtime.Host` charges a forward of that kind beside those — the
     simulator's cost model checked forward by forward, apart from the queueing its errors feed;
     and (:func:`calibration`, :func:`calibrated`) the same groups of a calibration trace's forwards
     as the paces and interference the simulation of the measured trace takes; (:func:`table_shape`,
     :func:`reshaped_profile`) the profile's prefill table reshaped to its lone forwards;
     (:func:`host_drift`) how far the host's own pace moved between two serves; (:func:`deployed_paces`,
     :func:`deployed_paces_by_instance`, :func:`scaled_profile`) the chip as a deployment's instances got it,
     for the planner; and
     (:func:`pace_timeline`, :func:`mean_pace`) how it moved within one, 10 s by 10 s.

A neighbour is another instance whose forwards cover more than half of the forward's wall time
(counted once, as the kind it ran longest). The line's state is not logged: the charge leaves out
a busy line's cost, which the served forwards include while KV crosses.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from dataclasses import replace

from placer.sim.runtime import ExecutorRuntime, Host, interference_rows


def _neighbours(at: float, wall: float, inst: str, spans: dict[str, list[tuple[float, float, str]]],
                starts: dict[str, list[float]]) -> tuple[str, ...]:
    end, kinds = at + wall, []
    for other, rows in spans.items():
        if other == inst:
            continue
        cover: dict[str, float] = {}
        i = max(0, bisect_left(starts[other], at) - 1)
        while i < len(rows) and rows[i][0] < end:
            s, e, kind = rows[i]
            if e > at:
                cover[kind] = cover.get(kind, 0.0) + min(e, end) - max(s, at)
            i += 1
        if sum(cover.values()) > wall / 2:
            kinds.append(max(cover, key=cover.get))
    return tuple(sorted(kinds))


def _rows(forwards: dict[str, list[list]], table):
    """(kind, neighbours' kinds, size, thread CPU s, wall s, table s, context, began s) of each served forward
    inside the grid."""
    rows = [(kind, *r[:6]) for kind, rs in forwards.items() for r in rs if len(r) >= 6]
    spans: dict[str, list[tuple[float, float, str]]] = {}
    for kind, _size, _ctx, _cpu, wall, at, inst in rows:
        spans.setdefault(inst, []).append((at, at + wall, kind))
    for v in spans.values():
        v.sort()
    starts = {inst: [s for s, _, _ in v] for inst, v in spans.items()}
    for kind, size, ctx, cpu, wall, at, inst in rows:
        tab = (table.prefill if kind == "prefill" else table.decode).seconds_at(size, ctx)
        if tab and wall > 0:
            yield kind, _neighbours(at, wall, inst, spans, starts), size, cpu, wall, tab, ctx, at


def groups(forwards: dict[str, list[list]], table, rt: ExecutorRuntime
           ) -> dict[tuple[str, tuple[str, ...]], list[float]]:
    """(kind, neighbours' kinds) → [forwards, thread CPU s, wall s, table s, the Host's charge × table s]
    summed over the forwards inside the table's grid (each charged at its own batch). Empty for a run
    logged without start times and instances."""
    charges: dict[tuple, float] = {}
    out: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for kind, beside, size, cpu, wall, tab, _ctx, _at in _rows(forwards, table):
        key = (kind, beside, size if kind == "decode" else 0)
        if key not in charges:
            charges[key] = charge(rt, *key)
        g = out.setdefault((kind, beside), [0, 0.0, 0.0, 0.0, 0.0])
        g[0] += 1
        g[1] += cpu
        g[2] += wall
        g[3] += tab
        g[4] += charges[key] * tab
    return out


def calibration(forwards: dict[str, list[list]], table, least: int = 10) -> dict:
    """A served trace's forwards as the simulator's paces and interference (``ExecutorRuntime``'s
    ``prefill_pace``, ``decode_pace``, ``interference`` rows, with ``line_in_pace``): a kind's pace is
    the wall seconds ÷ the table's of its forwards with no neighbour of ours; its figure beside one
    neighbour's kind, that group's ÷ the pace. Groups of fewer than ``least`` forwards give nothing
    (the probes' figure stands). Empty for a run logged without start times and instances."""
    sums: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for kind, beside, _size, _cpu, wall, tab, _ctx, _at in _rows(forwards, table):
        g = sums.setdefault((kind, beside), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += wall
        g[2] += tab
    out: dict = {"forwards": {f"{k} {describe(list(b))}": g[0] for (k, b), g in sorted(sums.items())}}
    interference: dict[str, dict[str, float]] = {}
    for kind in ("prefill", "decode"):
        alone = sums.get((kind, ()))
        if not alone or alone[0] < least:
            continue
        pace = alone[1] / alone[2]
        out[f"{kind}_pace"] = round(pace, 3)
        for other in ("prefill", "decode"):
            g = sums.get((kind, (other,)))
            if g and g[0] >= least:
                interference.setdefault(kind, {})[other] = round(g[1] / g[2] / pace, 3)
    if interference:
        out["interference"] = interference
    return out


# Two serves of the same shape of trace on a steady host ran their lone forwards within 1.26x of each
# other's thread-CPU pace (:func:`host_drift` of the calibration vs the measured serve and of the repeats,
# 2026-12-04: full runs r-t and two quick runs, 1.03-1.26x). In one quick run the same-dc calibration ran at
# 2.35x its serve's, every 2-s window of it at 2-3x the table, its threads' CPU time doubled with them: the
# host, not the executor. Beyond this factor the pair says nothing of the simulator.
HOST_DRIFT = 1.5


def cpu_paces(forwards: dict[str, list[list]], table, least: int = 20) -> dict[str, float]:
    """Per kind, the thread CPU seconds ÷ the table's of a serve's forwards with no neighbour of ours (kinds
    with at least ``least`` of them): the host's speed on that trace, apart from waits for a core or the GIL."""
    sums: dict[str, list[float]] = {}
    for kind, beside, _size, cpu, _wall, tab, _ctx, _at in _rows(forwards, table):
        if not beside:
            g = sums.setdefault(kind, [0, 0.0, 0.0])
            g[0] += 1
            g[1] += cpu
            g[2] += tab
    return {kind: g[1] / g[2] for kind, g in sums.items() if g[0] >= least and g[2] > 0}


def host_drift(first: dict[str, list[list]], second: dict[str, list[list]], table) -> float:
    """The factor (≥ 1) by which the host's pace (:func:`cpu_paces`) moved between two serves: the largest
    over the kinds both have enough lone forwards of; 1.0 where they share none."""
    a, b = cpu_paces(first, table), cpu_paces(second, table)
    return max((max(a[k] / b[k], b[k] / a[k]) for k in a.keys() & b.keys()), default=1.0)


def pace_timeline(forwards: dict[str, list[list]], table, reference: dict[str, float], start: float = 0.0,
                  window_s: float = 10.0, least: int = 20) -> list[tuple[float, float]]:
    """The host's speed over a serve, window by window: [(from s, factor)], the thread CPU seconds of the
    window's forwards with no neighbour of ours ÷ what ``reference`` (:func:`cpu_paces`, per kind: a
    calibration serve's) gives their table seconds — the ``ExecutorRuntime.host_pace`` of a simulation whose
    paces came from that reference. Times are on the simulation's clock: the serve's less ``start`` (its
    first arrival). A window of fewer than ``least`` such forwards takes its neighbours' (the one before; the
    first ones, the first window with enough); the first window starts at 0. Empty with no window of enough.

    Why: one pace per serve leaves out a host that changed speed within it. In 2026-12-05 run y the first
    same-dc serve's lone decode steps went 0.87x the calibration's in its first 10 s, 1.18x in its fourth and
    1.41x in its last: the new conversations' 96-token answers, early in the trace, ran on a faster host than
    the calibration's and the turns, later, on a slower one, and TPOT P50 (a turn's) came out -30 %."""
    sums: dict[int, list[float]] = {}
    for kind, beside, _size, cpu, _wall, tab, _ctx, at in _rows(forwards, table):
        if beside or kind not in reference:
            continue
        g = sums.setdefault(int(max(at - start, 0.0) // window_s), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += cpu
        g[2] += tab * reference[kind]
    full = {i: g[1] / g[2] for i, g in sums.items() if g[0] >= least and g[2] > 0}
    if not full:
        return []
    out: list[tuple[float, float]] = []
    factor = round(full[min(full)], 4)
    for i in range(max(full) + 1):
        factor = round(full[i], 4) if i in full else factor
        if not out or out[-1][1] != factor:
            out.append((i * window_s, factor))
    return out


def mean_pace(timeline: list[tuple[float, float]], end_s: float) -> float:
    """The time-weighted geometric mean of a :func:`pace_timeline` over 0..``end_s`` (1.0 when empty): by how
    much the host moved on the whole, as a request that came at any time felt it."""
    if not timeline:
        return 1.0
    ends = [t for t, _ in timeline[1:]] + [max(end_s, timeline[-1][0] + 1e-9)]
    spans = [(max(e, 0.0) - max(t, 0.0), f) for (t, f), e in zip(timeline, ends)]
    total = sum(d for d, _ in spans)
    if total <= 0:
        return timeline[-1][1]
    return math.exp(sum(d * math.log(f) for d, f in spans if d > 0) / total)


def table_shape(forwards: dict[str, list[list]], table, kind: str = "prefill", least: int = 20,
                pull: float = 2.0) -> list[list[float]]:
    """Factors on a phase's table points that bring its shape to a served trace's lone forwards of that
    ``kind`` (their pace, served wall ÷ table seconds summed over them, divided out: the calibration
    still carries the level); ``[]`` with fewer than ``least`` lone forwards.

    The table answers in log seconds interpolated between its points, so a factor f_ij on point (i, j)
    moves a forward's log seconds by its interpolation weight on that point × log f_ij: one linear
    equation per lone forward (the log of its served wall ÷ table seconds, less the log of the pace),
    solved by least squares with each log f_ij pulled towards 0 by the weight of ``pull`` forwards
    standing on the point alone, so a point no forward comes near keeps its profiled value.

    Why: one pace per phase weighs a trace's forwards by their seconds. In 2026-12-03 run n a served
    prefill of 24-70 new tokens after 1100-1600 cached went 0.66-0.76x the table alone, one of ~1000
    new tokens 0.94-1.06x, in every serve; the pace (0.83) charged the many short ones 15-25 % too much,
    and same-dc's TTFT P50 came out +22 %. In run m the two went the other way round (1.07-1.30x and
    0.94-1.13x): the error is the profile's, not the engine's. Re-predicting runs k-o, TTFT P50/P90
    went from 22 to 23 of 30 within 15 % (mean error 12 % → 11 %). The decode table, fitted the same
    way, made TPOT P50 worse in three of four runs, so bench_serve reshapes the prefill table only."""
    import numpy as np

    grid = table.prefill if kind == "prefill" else table.decode
    lone = [(size, ctx, wall, tab) for k, beside, size, _cpu, wall, tab, ctx, _at in _rows(forwards, table)
            if k == kind and not beside]
    if len(lone) < least:
        return []
    log_pace = math.log(sum(r[2] for r in lone) / sum(r[3] for r in lone))
    n_ctx = len(grid.contexts)
    cells = len(grid.sizes) * n_ctx
    normal, rhs = np.eye(cells) * pull, np.zeros(cells)
    for size, ctx, wall, tab in lone:
        w = np.zeros(cells)
        for (i, j), weight in grid.weights(size, ctx):
            w[i * n_ctx + j] += weight
        normal += np.outer(w, w)
        rhs += w * (math.log(wall / tab) - log_pace)
    g = np.linalg.solve(normal, rhs)
    return [[round(math.exp(g[i * n_ctx + j]), 4) for j in range(n_ctx)] for i in range(len(grid.sizes))]


def deployed_paces(forwards: dict[str, list[list]], table, least: int = 20) -> dict[str, float]:
    """Per kind, the wall seconds ÷ the table's of ALL of a served trace's forwards inside the grid, whatever
    ran beside them (kinds with at least ``least``): the chip as each instance of that deployment got it —
    the host's pace, the serving process's own threads and its instances' forwards slowing each other, in the
    shares that deployment's load ran them. The planner's profile is the table × these (its laws have no
    neighbours); the simulator charges the same seconds apart (pace × interference while they overlap)."""
    sums: dict[str, list[float]] = {}
    for kind, _beside, _size, _cpu, wall, tab, _ctx, _at in _rows(forwards, table):
        g = sums.setdefault(kind, [0, 0.0, 0.0])
        g[0] += 1
        g[1] += wall
        g[2] += tab
    return {kind: round(g[1] / g[2], 3) for kind, g in sums.items() if g[0] >= least and g[2] > 0}


def deployed_paces_by_instance(forwards: dict[str, list[list]], table, least: int = 20) -> dict[str, dict[str, float]]:
    """:func:`deployed_paces` of each instance's own forwards (the rows' sixth field): the chip as that instance
    got it. In the pdd serves RLD's decode steps ran beside MD's far more often than MD's beside RLD's (RLD is
    idle but for its few relays), and one pace over both charged MD RLD's neighbour: serve18's calibration
    RLD 1.96, MD 1.52, both 1.62."""
    names = sorted({r[5] for rows in forwards.values() for r in rows if len(r) >= 6})
    out = {}
    for name in names:
        own = {kind: [r for r in rows if len(r) >= 6 and r[5] == name] for kind, rows in forwards.items()}
        paces = deployed_paces(own, table, least)
        if paces:
            out[name] = paces
    return out


def scaled_profile(profile: dict, paces: dict[str, float], source: str, chip: str | None = None) -> dict:
    """A profile (``ChipProfile`` JSON) whose first table's prefill and decode seconds are × ``paces`` (per
    kind; a kind without one is unchanged), its ``engine`` naming ``source``; ``chip``: its chip renamed (one
    profile per instance's role, each its own chip in the planner's scenario)."""
    out = json.loads(json.dumps(profile))
    table = out["tables"][0]
    if chip is not None:
        out["chip"] = table["chip"] = chip
    for kind, pace in paces.items():
        table[kind]["seconds"] = [[x * pace for x in row] for row in table[kind]["seconds"]]
    table["engine"] = f"{table.get('engine', '')}; × {source}"
    return out


def reshaped_profile(profile: dict, kind: str, factors: list[list[float]]) -> dict:
    """A profile (``ChipProfile`` JSON) whose first table's ``kind`` seconds are × ``factors``."""
    out = json.loads(json.dumps(profile))
    table = out["tables"][0]
    table[kind]["seconds"] = [[s * f for s, f in zip(row, frow)] for row, frow in zip(table[kind]["seconds"], factors)]
    table["engine"] = f"{table.get('engine', '')}; {kind} reshaped by a calibration serve"
    return out


def calibrated(rt: ExecutorRuntime, cal: dict) -> ExecutorRuntime:
    """``rt`` (the probes' runtime) with the paces and interference of a :func:`calibration`; the probes'
    figures stand where its groups were too small, and their busy line's rows go (its cost is inside the
    served forwards: ``line_in_pace``)."""
    rows = interference_rows(cal.get("interference", {}))
    have = {(k, o) for k, o, _ in rows}
    rows += tuple((k, o, v) for k, o, v in rt.interference if o != "line" and (k.split("@")[0], o) not in have)
    paces = {k: cal[k] for k in ("prefill_pace", "decode_pace") if k in cal}
    return replace(rt, **paces, interference=rows, line_in_pace=True)


def charge(rt: ExecutorRuntime, kind: str, beside: tuple[str, ...], batch: int = 0) -> float:
    """What the simulator's Host charges a ``kind`` forward (a decode step of ``batch`` sequences) per
    table second while ``beside`` run."""
    host = Host(rt)
    for k in (kind, *beside):
        host.change(0.0, +1, k)
    return host.factor(kind, batch=batch)


def compare(forwards: dict[str, list[list]], table, rt: ExecutorRuntime, least: int = 10) -> list[dict]:
    """One row per group of at least ``least`` forwards: served wall and CPU ÷ table, the charge, the error."""
    rows = []
    for (kind, beside), (n, cpu, wall, tab, charged) in sorted(groups(forwards, table, rt).items()):
        if n < least:
            continue
        served, simulated = wall / tab, charged / tab
        rows.append({"kind": kind, "beside": list(beside), "forwards": n, "served_wall": round(served, 3),
                     "served_cpu": round(cpu / tab, 3), "simulated": round(simulated, 3),
                     "error": round(simulated / served - 1, 3)})
    return rows


def describe(beside: list[str]) -> str:
    return "alone" if not beside else "beside " + " + ".join(beside)
