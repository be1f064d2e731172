"""The served forwards, grouped by what ran beside them, against what the simulator charges them.

in:  bench_serve's ``forwards_served`` (per kind, rows of [size, context, thread CPU s, wall s,
     began s, instance]: the engines' ``forward_log``), the profile's table, a setup's
     :class:`~placer.sim.runtime.ExecutorRuntime` (its probes around the serving)
out: per (kind, the kinds of forward the other instances were running): how many forwards, their
     wall seconds and thread CPU seconds ÷ the table's for the same shapes, and the factor
     :class:`~placer.sim.runtime.Host` charges a forward of that kind beside those — the
     simulator's cost model checked forward by forward, apart from the queueing its errors feed;
     and (:func:`calibration`, :func:`calibrated`) the same groups of a calibration trace's forwards
     as the paces and interference the simulation of the measured trace takes.

A neighbour is another instance whose forwards cover more than half of the forward's wall time
(counted once, as the kind it ran longest). The line's state is not logged: the charge leaves out
a busy line's cost, which the served forwards include while KV crosses.
"""

from __future__ import annotations

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
    """(kind, neighbours' kinds, size, thread CPU s, wall s, table s) of each served forward inside the grid."""
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
            yield kind, _neighbours(at, wall, inst, spans, starts), size, cpu, wall, tab


def groups(forwards: dict[str, list[list]], table, rt: ExecutorRuntime
           ) -> dict[tuple[str, tuple[str, ...]], list[float]]:
    """(kind, neighbours' kinds) → [forwards, thread CPU s, wall s, table s, the Host's charge × table s]
    summed over the forwards inside the table's grid (each charged at its own batch). Empty for a run
    logged without start times and instances."""
    charges: dict[tuple, float] = {}
    out: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for kind, beside, size, cpu, wall, tab in _rows(forwards, table):
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
    for kind, beside, _size, _cpu, wall, tab in _rows(forwards, table):
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
