"""The token-ID handoff in the serving bench: its parts as served, in the simulator, and the report's payload.

in:  the executor's request records of a PDD serve (``RequestRecord.extra``: ``handoff_mode``,
     ``handoff_tokens``, ``handoff_msg_bytes``, ``handoff_kv_bytes_replaced``, ``extend_s``,
     ``handoff_latency_s``, ``relay_tokens``; MD writes them, ``executor/roles/md.py``), the rows
     :func:`instrument` records per final handoff batch (wire, wait at MD, extend-decode), and the
     handoff plans the simulator made for the same trace (:func:`sim_handoffs` records them)
out: :func:`report` prints the handoff section of bench_serve's report; :func:`summary` — handoffs per
     mode, RLD's share of output tokens, the share of relayed requests MD finished, tokens handed
     over, latency parts mean/max/std; :func:`sim_summary` — the simulator's; :func:`payload` — a k-token
     handoff's token-ID message vs the KV it replaces (the PDD report's 100 tokens: 1.5 KB vs
     4,649 KB); :func:`print_report` prints them, the simulator's beside the executor's.

The split (wire: RLD's send → MD's inbox; wait: inbox → MD handles it; extend: MD's one extend-decode
forward) is measured by wrapping ``RoleWorker._on_message`` and ``MainWorker.on_handoff`` in this
process; the roles are unchanged. ``handoff_latency_s`` as MD records it is the sum of the three.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Iterator

MODES = ("one-shot", "catch-up")
PARTS = ("wire", "wait", "extend", "total")


@contextlib.contextmanager
def instrument(rows: list[dict]) -> Iterator[list[dict]]:
    """Record, per final handoff batch served inside the block, when it reached MD's inbox and how long
    MD's handling (the extend-decode) took: rows of wire / wait / extend / total seconds and tokens."""
    from executor.roles import common
    from executor.roles.md import MainWorker
    from executor.transport.messages import HandoffTokens

    arrived: dict[str, float] = {}
    on_message, on_handoff = common.RoleWorker._on_message, MainWorker.on_handoff

    def timed_message(self, src, msg):
        if isinstance(msg, HandoffTokens) and msg.final:
            arrived[msg.request_id] = time.time()
        return on_message(self, src, msg)

    def timed_handoff(self, src, h):
        start, t0 = time.time(), time.perf_counter()
        out = on_handoff(self, src, h)
        if h.final and h.request_id in arrived:
            inbox = arrived.pop(h.request_id)
            row = {"wire": inbox - h.sent_at_unix_s, "wait": start - inbox, "extend": time.perf_counter() - t0,
                   "tokens": len(h.tokens), "mode": h.mode, "rounds": h.round}
            row["total"] = row["wire"] + row["wait"] + row["extend"]
            rows.append(row)
        return out

    common.RoleWorker._on_message = timed_message
    MainWorker.on_handoff = timed_handoff
    try:
        yield rows
    finally:
        common.RoleWorker._on_message, MainWorker.on_handoff = on_message, on_handoff


def payload(tokens: int = 100) -> dict:
    """A ``tokens``-token final handoff batch: its wire bytes (the executor's message encoding) vs the KV of
    those tokens it replaces (the bench model's KV per token)."""
    from bench.serve_trace import MODEL
    from executor.transport.messages import HandoffTokens, encode

    msg = HandoffTokens("req-000000", 1, [255] * tokens, True, tokens, "one-shot", 1)
    ids, kv = len(encode(msg)), tokens * MODEL.kv_bytes_per_token
    return {"tokens": tokens, "id_bytes": ids, "kv_bytes": kv, "ratio": kv / ids}


def _stats(xs: list[float]) -> dict:
    return {"mean": statistics.mean(xs), "max": max(xs), "std": statistics.pstdev(xs), "n": len(xs)} if xs else {}


def summary(records: list, split: list[dict] | None = None) -> dict:
    """The executor's handoffs in one serve: ``records`` the request records (None for a failed one);
    ``split`` the rows :func:`instrument` recorded."""
    done = [r for r in records if r is not None]
    relayed = [r for r in done if r.pipeline == "P-RLD-MD"]
    handed = [r for r in relayed if "handoff_latency_s" in r.extra]
    output = sum(r.output_tokens for r in done)
    rld = sum(r.extra.get("relay_tokens", 0) for r in done if r.pipeline in ("P-RLD-MD", "P-RLD"))
    out = {"relayed": len(relayed), "filtered": sum(r.pipeline == "P-RLD" for r in done),
           "handoffs": {m: sum(r.extra.get("handoff_mode") == m for r in handed) for m in MODES},
           "md_finished_share": len(handed) / len(relayed) if relayed else math.nan,
           "rld_token_share": rld / output if output else math.nan,
           "tokens": [r.extra.get("handoff_tokens", 0) for r in handed],
           "extend_s": _stats([r.extra["extend_s"] for r in handed if "extend_s" in r.extra]),
           "latency_s": _stats([r.extra["handoff_latency_s"] for r in handed])}
    if split:
        out["parts"] = {part: _stats([row[part] for row in split]) for part in PARTS}
        out["parts_by_mode"] = {m: {part: _stats([row[part] for row in split if row["mode"] == m]) for part in PARTS}
                                for m in MODES if any(row["mode"] == m for row in split)}
    return out


@contextlib.contextmanager
def sim_handoffs(plans: list) -> Iterator[list]:
    """Record the simulator's handoff plans (``placer.sim.handoff.HandoffPlan``) made inside the block."""
    from placer.sim.events import relay

    plan_handoff = relay.plan_handoff

    def recorded(*args, **kw):
        plan = plan_handoff(*args, **kw)
        plans.append(plan)
        return plan

    relay.plan_handoff = recorded
    try:
        yield plans
    finally:
        relay.plan_handoff = plan_handoff


def sim_summary(sim: dict, plans: list) -> dict:
    """The simulator's handoffs of one run: ``sim`` its result dict, ``plans`` :func:`sim_handoffs`'s.
    The share of relayed requests MD finished comes with :func:`with_relayed`."""
    counts = sim["handoffs"]  # a placer.sim SimResult or its dict
    return {"handoffs": {m: counts.get(m, 0) for m in MODES}, "line_first": counts.get("none", 0),
            "md_finished_share": math.nan,
            "rld_token_share": sim["rld_token_share"],
            "tokens": [sum(b.num_tokens for b in p.batches) for p in plans],
            "extend_s": _stats([p.md_extend_s for p in plans]),
            "final_extend_s": _stats([p.final_extend_s for p in plans]),
            "gap_s": _stats([p.gap_s for p in plans])}


def with_relayed(simulated: dict, relayed: int) -> dict:
    """``simulated`` with the share of the trace's ``relayed`` (P-RLD-MD) requests MD finished: handed over,
    or reached by the line before RLD had the KV."""
    done = sum(simulated["handoffs"].values()) + simulated.get("line_first", 0)
    return {**simulated, "md_finished_share": done / relayed if relayed else math.nan}


def _ms(st: dict, key: str) -> str:
    return f"{1000 * st[key]:.1f}" if st else "-"


def print_report(measured: dict | None, simulated: dict | None, pay: dict) -> None:
    """The handoff section of bench_serve's report."""
    print(f"\nhandoff payload ({pay['tokens']} tokens, the PDD report's microbenchmark: 1.5 KB of token IDs vs "
          f"4,649 KB of KV): token IDs {pay['id_bytes'] / 1e3:.1f} KB vs the KV they replace "
          f"{pay['kv_bytes'] / 1e3:,.0f} KB ({pay['ratio']:,.0f}x smaller)")
    if not measured:
        return
    print("handoffs (PDD), executor vs simulator:")
    rows = [("relayed requests (P-RLD-MD)", str(measured["relayed"]), str(measured["relayed"])),
            ("filtered requests (P-RLD, finished on RLD)", str(measured["filtered"]), "-")]
    for m in MODES:
        rows.append((f"handoffs {m}", str(measured["handoffs"][m]),
                     str(simulated["handoffs"][m]) if simulated else "-"))
    share = lambda x: f"{100 * x:.1f} %" if not math.isnan(x) else "-"
    rows += [("share of relayed requests MD finished", share(measured["md_finished_share"]),
              share(simulated["md_finished_share"]) if simulated else "-"),
             ("RLD's share of output tokens", share(measured["rld_token_share"]),
              share(simulated["rld_token_share"]) if simulated else "-")]
    mean_tokens = lambda t: f"{statistics.mean(t):.0f} (max {max(t)})" if t else "-"
    rows += [("tokens handed over per handoff", mean_tokens(measured["tokens"]),
              mean_tokens(simulated["tokens"]) if simulated else "-"),
             ("extend-decode per handoff, all batches (ms mean/max/std)",
              "/".join(_ms(measured["extend_s"], k) for k in ("mean", "max", "std")),
              "/".join(_ms(simulated["extend_s"], k) for k in ("mean", "max", "std")) if simulated else "-")]
    width = max(len(r[0]) for r in rows)
    print(f"  {'':<{width}} {'executor':>22} {'simulator':>22}")
    for label, a, b in rows:
        print(f"  {label:<{width}} {a:>22} {b:>22}")
    if simulated and simulated.get("line_first"):
        print(f"  (simulator: {simulated['line_first']} relayed requests' KV reached MD before RLD's: MD decoded them)")
    lat = measured["latency_s"]
    if lat:
        print(f"  handoff latency (final batch sent -> MD extended it, streams on): mean {_ms(lat, 'mean')} ms, "
              f"max {_ms(lat, 'max')} ms, std {_ms(lat, 'std')} ms (the report: 305 / 321.4 / 4.8 ms)")
    for label, parts in [("all", measured.get("parts"))] + [(m, p) for m, p in measured.get("parts_by_mode", {}).items()]:
        if parts and parts.get("total"):
            print(f"  final batch, {label} ({parts['total']['n']}): " + "; ".join(
                f"{part} {_ms(parts[part], 'mean')}/{_ms(parts[part], 'max')}/{_ms(parts[part], 'std')}"
                for part in PARTS) + " ms (mean/max/std)")


def report(pdd: dict, pred: dict) -> dict:
    """Print the handoffs of bench_serve's PDD serve (``pdd``, its result) beside the simulator's for the same
    trace (``pred``, bench_serve's predictions) and the 100-token payload; return them."""
    measured = pdd.get("handoff_summary")
    simulated = pred.get("simulator", {}).get("pdd", {}).get("handoff")
    if measured and simulated:
        simulated = with_relayed(simulated, measured["relayed"])
    pay = payload(100)
    print_report(measured, simulated, pay)
    served = pred.get("as_served", {}).get("pdd", {}).get("handoff")
    if measured and served:  # RLD's tokens before a handoff are its steps in the KV's crawl: the host's pace moves them
        print(f"  the simulator at the host's speed as the serve went (as served): RLD's share "
              f"{100 * served['rld_token_share']:.1f} %, tokens handed over per handoff "
              f"{statistics.mean(served['tokens']) if served['tokens'] else math.nan:.0f}, handoffs "
              + ", ".join(f"{m} {served['handoffs'][m]}" for m in MODES))
    if measured and not sum(measured["handoffs"].values()):
        print("  handoffs: none happened (every relayed request finished on RLD before MD had its KV)")
    return {"executor": measured, "simulator": simulated, "payload_100": pay}
