"""Why this plan: what a plan's figures say about its own choices, for the CLI, the report
and the dashboard (one function, three faces).

in:  a :class:`~placer.problem.Problem` and a :class:`~placer.plan.Plan` (with assignments)
out: :class:`Why` — plain strings and numbers, no markup:

* ``pools``: each pool's utilisation and KV memory (:func:`placer.pool_usage.pool_usage`);
* ``pipelines``: one line per PDD pipeline saying why it carries what it carries, or
  why it carries nothing — derived from the flows (:mod:`placer.flows`): a pipeline that
  relays (P-RLD-MD) pays off only for classes whose prefill plus WAN transfer would
  miss the TTFT budget on P-MD — argued only over lines the plan's routes cross (no route
  over the WAN: nothing to relay); P-RLD only for classes the filter rule admits, and its
  line names where those classes go instead (relayed only when the plan relays them);
  then one line per chip type per datacenter the plan leaves idle (:mod:`placer.report.idle`,
  also ``idle``);
* ``binding``: the binding rows sorted by marginal BCR (largest first), a row worth
  nothing explained (another row binds next, or one unit is less than one instance);
* ``routes``: routes grouped by (pipeline, src, dst), req/s rounded to 2 decimals, the
  classes of each group listed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from placer.flows import Route, instance
from placer.pdd import P, P_MD, P_RLD, P_RLD_MD
from placer.plan import Plan
from placer.pool_usage import PoolUsage, pool_usage
from placer.problem import Class, Problem
from placer.report.idle import idle_reasons

#: Marginal BCR changes smaller than this (req/USD) count as zero.
ZERO_MARGINAL = 5e-4


@dataclass
class Why:
    pools: list[PoolUsage]
    pipelines: list[str]
    binding: list[dict]
    routes: list[dict]
    notes: list[str] = field(default_factory=list)
    idle: list[str] = field(default_factory=list)


def explain(problem: Problem, plan: Plan) -> Why:
    """Why ``plan`` looks as it does (see the module docstring); the idle lines close ``pipelines``
    too, so every face that lists them shows them."""
    idle = idle_reasons(problem, plan)
    return Why(pools=pool_usage(problem, plan), pipelines=pipeline_reasons(problem, plan) + idle,
               binding=binding_sorted(plan), routes=grouped_routes(plan), notes=marginal_notes(plan), idle=idle)


def _rps_by_pipeline(plan: Plan) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for r in plan.routes:
        out[r.pipeline] += r.rps
    return out


def _crossed_lines(plan: Plan) -> set[tuple[str, str]]:
    """The WAN lines (src, dst) some route of the plan crosses with req/s > 0."""
    return {(r.src, r.dst) for r in plan.routes if r.rps > 0 and r.src != r.dst}


def _p_md_ttft_s(problem: Problem, plan: Plan, c: Class) -> tuple[float, str] | None:
    """Least prefill + WAN transfer (no queueing) of class ``c`` on P-MD over a line some route
    of the plan crosses, from a datacenter with a P pool to one with a decoder; None without one."""
    p_pools = [p for p in plan.pools if p.role == P and p.count > 0]
    md_dcs = {p.datacenter for p in plan.pools if p.role != P and p.count > 0}
    crossed = _crossed_lines(plan)
    best = None
    for p in p_pools:
        prefill_s = instance(problem, p.chip, p.tp).prefill_s(c.input_tokens, c.hit_rate)
        for dst in sorted(md_dcs - {p.datacenter}):
            if (p.datacenter, dst) not in problem.links or (p.datacenter, dst) not in crossed:
                continue
            total = prefill_s + Route(problem, c, P_MD, p.datacenter, dst, problem.options.drc).wan_s(0.0)
            if best is None or total < best[0]:
                best = (total, f"{p.datacenter}->{dst}")
    return best


def pipeline_reasons(problem: Problem, plan: Plan) -> list[str]:
    """One line per PDD pipeline: what it carries and why, or why it carries nothing."""
    if any(r.pipeline == "P-D" for r in plan.routes):
        return ["P-D only: a PD baseline (no RelayDecode, no MainDecode)"]
    rps = _rps_by_pipeline(plan)
    per_class = {c.name: _p_md_ttft_s(problem, plan, c) for c in problem.classes}
    known = {k: v for k, v in per_class.items() if v is not None}
    return [_p_md_line(plan, rps), _relay_line(problem, plan, rps, known), _filter_line(problem, plan, rps)]


def _p_md_line(plan: Plan, rps: dict[str, float]) -> str:
    if rps.get(P_MD, 0.0) <= 0:
        return f"{P_MD} unused: every request the plan serves is relayed or filtered"
    local = sum(r.rps for r in plan.routes if r.pipeline == P_MD and r.src == r.dst)
    where = f" ({local:.2f} req/s decoded where they were prefilled)" if local > 0 else ""
    return f"{P_MD} carries {rps[P_MD]:.2f} req/s{where}: their KV reaches MD within the TTFT budget"


def _relay_line(problem: Problem, plan: Plan, rps: dict[str, float], known: dict[str, tuple[float, str]]) -> str:
    """P-RLD-MD: the relayed classes whose P-MD prefill + transfer would miss the budget
    (and those relayed though they would fit), or why nothing is relayed."""
    budget = problem.ttft_p90_s
    if rps.get(P_RLD_MD, 0.0) > 0:
        relayed = sorted({r.request_class for r in plan.routes if r.pipeline == P_RLD_MD and r.rps > 0})
        late = [k for k in relayed if k in known and known[k][0] > budget]
        head = f"{P_RLD_MD} carries {rps[P_RLD_MD]:.2f} req/s of {len(relayed)} classes: "
        if not late:
            fastest = min((known[k][0] for k in relayed if k in known), default=0.0)
            return (head + f"P-MD would meet the {budget:g} s budget for them before queueing (prefill + transfer "
                    f"from {fastest:.2f} s): relaying them gives the plan a higher BCR")
        names = ", ".join(late[:3]) + ("…" if len(late) > 3 else "")
        rest = (f"; the other {len(relayed) - len(late)} would fit it and are relayed because that gives the plan "
                "a higher BCR") if len(relayed) > len(late) else ""
        return (head + f"{len(late)} of them ({names}) would miss the {budget:g} s TTFT budget on P-MD (prefill + "
                f"WAN transfer ≥ {min(known[k][0] for k in late):.2f} s){rest}")
    if not _crossed_lines(plan):
        return ("RLD unused: no route crosses the WAN (every request is decoded in the datacenter that "
                "prefilled it), so there is no transfer to relay")
    if not known:
        return "RLD unused: no line the plan's routes cross joins a P datacenter to a decoder's datacenter"
    slowest, (seconds, line) = max(known.items(), key=lambda kv: kv[1][0])
    if seconds <= budget:
        return (f"RLD unused: every class's WAN transfer fits its TTFT budget on P-MD (slowest {slowest}: prefill + "
                f"transfer {seconds:.2f} s over {line} ≤ {budget:g} s)")
    return (f"RLD unused: {slowest} would miss the {budget:g} s budget on P-MD ({seconds:.2f} s over {line}), but an "
            "RLD pool would cost more than the goodput it adds")


def _filter_line(problem: Problem, plan: Plan, rps: dict[str, float]) -> str:
    filterable = [c.name for c in problem.classes if c.filterable]
    if rps.get(P_RLD, 0.0) > 0:
        return (f"{P_RLD} (filter) finishes {rps[P_RLD]:.2f} req/s on RLD without crossing the WAN "
                f"(long input, low hit, short output: {', '.join(filterable)})")
    if not problem.options.filter:
        return f"{P_RLD} (filter) off: options.filter is false"
    if not filterable:
        return f"{P_RLD} (filter) unused: no class has a long input, a low hit and a short output"
    names = ", ".join(filterable)
    routed = {r.pipeline for r in plan.routes if r.rps > 0 and r.request_class in filterable}
    if not routed:
        return f"{P_RLD} (filter) unused: the plan serves none of {names}"
    how = {P_RLD_MD: "relayed to MD (P-RLD-MD)", P_MD: "decoded on MD (P-MD)"}
    where = " or ".join(how.get(p, p) for p in sorted(routed))
    return f"{P_RLD} (filter) unused: {names} are {where}, which costs less than finishing them on RLD"


def binding_sorted(plan: Plan) -> list[dict]:
    """Binding rows, largest marginal BCR first, each with ``why`` when it is worth nothing."""
    binding = list(plan.binding)
    names = [b.constraint for b in binding]
    rows = []
    for b in binding:
        delta = (b.model_extra or {}).get("delta_bcr_requests_per_usd")
        why = ""
        if isinstance(delta, (int, float)) and abs(delta) < ZERO_MARGINAL:
            others = [n for n in names if n != b.constraint]
            why = ("tight, but one more unit buys nothing: " +
                   (f"{', '.join(others[:3])} bind{'s' if len(others) == 1 else ''} as well"
                    if others else "plans come in whole instances, and one unit is less than the next one needs"))
        rows.append({"constraint": b.constraint, "marginal": b.marginal,
                     "delta": delta if isinstance(delta, (int, float)) else None, "why": why})
    rows.sort(key=lambda r: -(r["delta"] if r["delta"] is not None else float("-inf")))
    return rows


def marginal_notes(plan: Plan) -> list[str]:
    """Why marginals are missing, when they are."""
    if plan.binding and all(b.marginal.startswith("not computed") for b in plan.binding):
        if plan.objective != "bcr":
            return [f"marginals are BCR changes and are re-solved for --objective bcr only; this plan's objective is "
                    f"{plan.objective}, so its binding rows are listed without them"]
        return ["marginals not computed: pass --marginals (the default) and a time limit that leaves room "
                "for one re-solve per binding row"]
    return []


def grouped_routes(plan: Plan) -> list[dict]:
    """Routes summed per (pipeline, src, dst), with their classes; req/s to 2 decimals."""
    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for r in plan.routes:
        if r.rps > 0:
            groups[(r.pipeline, r.src, r.dst)].append(r)
    rows = []
    for (pipeline, src, dst), routes in sorted(groups.items(), key=lambda kv: -sum(r.rps for r in kv[1])):
        rows.append({"pipeline": pipeline, "src": src, "dst": dst, "rps": f"{sum(r.rps for r in routes):.2f}",
                     "classes": ", ".join(sorted({r.request_class for r in routes}))})
    return rows
