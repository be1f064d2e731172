"""Readable terminal rendering of plans, comparisons and simulations (rich).

in:  a Plan (and its :class:`~placer.report.why.Why`), a compare result, a Simulation beside its plan
out: rich renderables (:class:`placer.cli.fold.Fold`: tables that fold on narrow terminals);
     no logic beyond formatting. Every user string (scenario, class, datacenter, chip
     names) reaches rich as :class:`rich.text.Text`, never as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text

from placer.cli.fold import Fold, plain
from placer.plan import Plan
from placer.report import tables
from placer.report.headline import headline
from placer.report.diagram import ROLE_ORDER
from placer.report.why import Why
from placer.shapes import shape_of

if TYPE_CHECKING:  # simulate's view only; `placer optimize --no-verify` imports no simulator
    from placer.sim.result import SimResult


def _f(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def metrics_table(plan: Plan, title: str | None = None) -> Fold:
    m = plan.metrics
    rows = [
        ("BCR (SLA requests per USD)", _f(m.bcr_requests_per_usd, 2)),
        ("cost (USD/h)", _f(m.cost_usd_per_h, 2)),
        ("SLA goodput (req/s)", _f(m.goodput_rps)),
        ("served / offered (req/s)", f"{_f(m.served_rps)} / {_f(m.offered_rps)}"),
        ("SLA attainment", f"{100 * m.sla_attainment:.1f} %"),
        ("TTFT P50 / P90 / P99 (s), planned", f"{_f(m.ttft_p50_s)} / {_f(m.ttft_p90_s)} / {_f(m.ttft_p99_s)}"),
        ("TPOT (s)", _f(m.tpot_s, 4)),
        ("WAN, busiest direction", tables.busiest_line(plan)),
        ("RLD share of output tokens", f"{100 * m.rld_token_share:.1f} %"),
        ("solver", f"{plan.solver.backend} {plan.solver.status}, gap {100 * plan.solver.mip_gap:.2f} %, "
                   f"{plan.solver.seconds:.2f} s"),
    ]
    return Fold(title or f"plan for {plan.scenario} (objective {plan.objective})", ("metric", "value"), rows,
                right=("value",), show_header=False)


def pools_table(plan: Plan, why: Why | None = None) -> Fold:
    """Pools; with ``why``, each pool's utilisation and KV memory per instance. The tp column is the
    instance shape's label (``8``, ``8-dep``, ``16-pp2``: :class:`~placer.shapes.Shape`), so two
    shapes of the same chips never print alike; ``chips`` is the chip count."""
    usage = {u.key: u for u in (why.pools if why else [])}
    headers = ["role", "datacenter", "chip", "tp", "instances", "chips"]
    if why:
        headers += ["utilisation", "KV GiB used / capacity"]
    rows = []
    for p in sorted(plan.pools, key=lambda p: (p.datacenter, ROLE_ORDER.index(p.role), p.chip, p.tp)):
        row = [p.role, p.datacenter, p.chip, f"{p.tp}", str(p.count), str(p.count * p.tp)]
        u = usage.get(p.key)
        if why:
            row += ([f"{100 * u.utilization:.0f} %", f"{u.kv_gib_used:.0f} / {u.kv_gib_capacity:.0f}"]
                    if u else ["-", "-"])
        rows.append(row)
    return Fold("pools", headers, rows, right=("tp", "instances", "chips", "utilisation", "KV GiB used / capacity"))


def routes_table(plan: Plan, why: Why | None = None) -> Fold:
    """Routes grouped by pipeline and datacenter pair (req/s to 2 decimals), or one row per route."""
    if why is not None:
        rows = [(r["pipeline"], r["src"], r["dst"], r["rps"], r["classes"]) for r in why.routes]
        return Fold("routes (grouped by pipeline and datacenter pair)", ("pipeline", "src", "dst", "req/s", "classes"),
                    rows, right=("req/s",))
    rows = [(r.request_class, r.pipeline, r.src, r.dst, _f(r.rps, 2)) for r in plan.routes if r.rps > 0]
    return Fold("routes", ("class", "pipeline", "src", "dst", "req/s"), rows, right=("req/s",))


def links_table(plan: Plan) -> Fold:
    """Each direction of each line against that direction's capacity."""
    rows = [(r["src"], r["dst"], r["used"], r["capacity"], r["utilisation"]) for r in tables.link_rows(plan)]
    return Fold("WAN links (per direction)", ("src", "dst", "used Gbit/s", "capacity Gbit/s", "used"), rows,
                right=("used Gbit/s", "capacity Gbit/s", "used"))


def binding_table(plan: Plan, why: Why | None = None) -> Fold:
    """Binding rows, sorted by marginal value when ``why`` is given, a worthless one explained."""
    if why is None:
        return Fold("binding constraints (what one more unit buys)", ("constraint", "marginal"),
                    [(b.constraint, b.marginal) for b in plan.binding])
    rows = [(b["constraint"], b["marginal"] + (f" ({b['why']})" if b["why"] else "")) for b in why.binding]
    return Fold("binding constraints, largest marginal first (what one more unit buys)", ("constraint", "marginal"),
                rows)


def plan_view(plan: Plan, why: Why | None = None) -> Group:
    """The plan as tables; with ``why`` (:func:`placer.report.why.explain`), why it looks so."""
    parts: list = [metrics_table(plan), pools_table(plan, why), routes_table(plan, why)]
    if plan.links:
        parts.append(links_table(plan))
    parts.append(plain(f"handoff: {plan.handoff.mode}, catch-up above "
                       f"{plan.handoff.catch_up_threshold_tokens} pending tokens"))
    if why is not None:
        parts.append(Text("why this plan", style="bold"))
        parts += [plain(f"  {line}") for line in why.pipelines]
    if plan.binding:
        parts.append(binding_table(plan, why))
    for note in [*(why.notes if why else []), *plan.notes]:
        parts.append(Text(f"note: {note}", style="dim"))  # Text: no markup parsing
    return Group(*parts)


def compare_view(result: dict) -> Group:
    """PDD beside the baselines: the headline first (what each side carries within the inventory, PDD
    also at its best BCR there when a baseline is partial, then the equal-load comparison and what it
    assumed), then the table (PDD's best-BCR row ``pdd, best BCR`` after PDD's; served / offered on
    every row, the busiest WAN direction, ratios: "n/a", never nan), the hints, each baseline's
    rules in one line and its verdict."""
    pdd: Plan = result["pdd"]
    rows, notes, rules = [], [], []
    for r in tables.baseline_rows(result):
        if r.get("rules") and not r["name"].endswith(", scaled"):
            rules.append(Text(f"{r['name']} rules: {r['rules']}", style="dim"))
        if "error" in r:
            rows.append((r["name"], *(["n/a"] if r["not_applicable"] else ["-"]) * 8))
            notes.append(Text(f"{r['name']}: {r['error']}", style="dim" if r["not_applicable"] else "red"))
            continue
        rows.append((r["name"], r["served"].replace(" / ", "/"), r["bcr"], r["cost"], r["goodput"], r["ttft_p90"],
                     _short_line(r["wan"]), r["bcr_x"], r["p90_x"]))
        if r["verdict"]:
            notes.append(Text(f"{r['name']}: {r['verdict']}", style="dim"))
    # two-line headers, compact cells, rates' unit in the title: the table fits 120 columns (it took 177)
    headers = ("plan", "served/\noffered", "BCR\nreq/USD", "cost\nUSD/h", "SLA\ngoodput", "TTFT P90\ns (plan)",
               "WAN busiest\nGbit/s used/cap", "PDD/it\nBCR", "PDD/it\nP90")
    table = Fold(f"PDD against the PD baselines ({pdd.scenario}); rates in req/s", headers, rows, right=headers[1:6] + headers[7:])
    head, *hints = headline(result).split("\nhint: ")
    return Group(plain(head), table, *[plain(f"hint: {h}") for h in hints], *rules, *notes,
                 *_break_even_lines(result.get("break_even")))


def _short_line(text: str) -> str:
    """``11.66 of 25 Gbit/s dc-a->dc-b`` as ``11.66/25 dc-a->dc-b`` (the unit is in the header)."""
    return text.replace(" of ", "/", 1).replace(" Gbit/s", "", 1)


def _break_even_lines(answers: dict | None) -> list[Text]:
    """The break-even answers of `placer compare` (placer.breakeven), one line each."""
    if not answers:
        return []
    if "error" in answers:
        return [Text(f"break-even: {answers['error']}", style="red")]
    return [Text(f"break-even: {a['question']}: {a['answer']} ({a['resolves']} re-solves, {a['seconds']:.1f} s)")
            for a in answers.values()]


def simulate_view(result: SimResult, plan: Plan) -> Group:
    """Rich renderables of a simulation: headline figures (simulated beside planned), routes, pools (tp
    as the shape's label where the pool row names one), links."""
    d = result.data
    m = plan.metrics
    rows = [
        ("BCR (SLA requests per USD)", f"{d['bcr_requests_per_usd']:.2f}", f"{m.bcr_requests_per_usd:.2f}"),
        ("SLA goodput (req/s)", f"{d['goodput_rps']:.3f}", f"{m.goodput_rps:.3f}"),
        ("SLA attainment", f"{100 * d['sla_attainment']:.1f} %", f"{100 * m.sla_attainment:.1f} %"),
        ("TTFT P50 / P90 / P99 (s)", f"{d['ttft_p50_s']:.3f} / {d['ttft_p90_s']:.3f} / {d['ttft_p99_s']:.3f}",
         f"{m.ttft_p50_s:.3f} / {m.ttft_p90_s:.3f} / {m.ttft_p99_s:.3f}"),
        ("TPOT P50 / P90 (s)", f"{d['tpot_p50_s']:.4f} / {d['tpot_p90_s']:.4f}", f"{m.tpot_s:.4f}"),
        ("RLD share of output tokens", f"{100 * d['rld_token_share']:.1f} %", f"{100 * m.rld_token_share:.1f} %"),
        ("served / offered (req/s)", f"{d['served_rps']:.3f} / {d['offered_rps']:.3f}",
         f"{m.served_rps:.3f} / {m.offered_rps:.3f}"),
        ("handoffs one-shot / catch-up", f"{d['handoffs']['one-shot']} / {d['handoffs']['catch-up']}", ""),
        ("prefix hit P / decode side", f"{d['p_hit_rate']:.3f} / {d['drc_hit_rate']:.3f}", ""),
    ]
    head = Fold(f"simulation of {plan.scenario} ({d['requests']} requests, seed {d['seed']})",
                ("metric", "simulated", "planned (ILP)"), rows, right=("simulated", "planned (ILP)"))
    routes = Fold("routes", ("pipeline", "src", "dst", "share", "TTFT P50", "P90", "P99", "SLA"), [
        (r["pipeline"], r["src"], r["dst"], f"{100 * r['share']:.1f} %", f"{r['ttft_p50_s']:.3f}",
         f"{r['ttft_p90_s']:.3f}", f"{r['ttft_p99_s']:.3f}", f"{100 * r['sla_attainment']:.1f} %")
        for r in d["routes"]], right=("share", "TTFT P50", "P90", "P99", "SLA"))
    pools = Fold("pools", ("role", "datacenter", "chip", "tp", "n", "utilisation", "mean batch", "mean / max queue"), [
        (p["role"], p["datacenter"], p["chip"], f"{shape_of(p['tp'], p.get('shape'))}", str(p["count"]),
         f"{100 * p['utilization']:.1f} %",
         f"{p['mean_batch']:.1f}" if "mean_batch" in p else "-", f"{p['mean_queue']:.2f} / {p['max_queue']}")
        for p in d["pools"]], right=("tp", "n", "utilisation", "mean batch", "mean / max queue"))
    links = Fold("links (per direction)", ("line", "capacity", "mean", "peak", "transfers"), [
        (f"{link['src']} -> {link['dst']}", f"{link['gbit_per_s_capacity']:g} Gbit/s", f"{link['mean_gbit_per_s']:.2f}",
         f"{link['peak_gbit_per_s']:.2f}", str(link["transfers"])) for link in d["links"] if link["transfers"]],
        right=("capacity", "mean", "peak", "transfers"))
    return Group(head, routes, pools, links)


def sla_line(plan: Plan, sla_s: float, binds: str = "") -> Text:
    """The first line of ``placer optimize``: whether the plan (and its simulation) meet the SLA."""
    m, v = plan.metrics, plan.verification
    sim = (f"; simulated {v.ttft_p90_s:.3f} s, {100 * v.sla_attainment:.1f} % ({v.requests} requests)"
           if v is not None else "")
    if m.sla_met is False:
        from placer.slacheck import miss_words

        text = f"SLA MISSED: the plan promises {miss_words(m.sla_misses or [])}{sim}"
        return Text(text + (f"; binding: {binds}" if binds else ""), style="bold red")
    head = (f"SLA met as planned: TTFT P90 {m.ttft_p90_s:.3f} s <= {sla_s:g} s, {100 * m.sla_attainment:.1f} % "
            f"of requests within it{sim}")
    if v is not None and not v.sla_met:
        missed = head.replace("SLA met as planned", "SLA met as planned but MISSED in simulation")
        return Text(missed, style="bold yellow")
    return Text(head, style="bold green")


def verification_view(plan: Plan) -> Group:
    """The promise beside the short simulation, its warnings, and the perturbed runs' spread."""
    v, m = plan.verification, plan.metrics
    parts: list = []
    if v is None:
        return Group()
    rows = [("TTFT P90 (s)", _f(m.ttft_p90_s), _f(v.ttft_p90_s)),
            ("SLA attainment", f"{100 * m.sla_attainment:.1f} %", f"{100 * v.sla_attainment:.1f} %"),
            ("SLA goodput (req/s)", _f(m.goodput_rps), _f(v.goodput_rps)),
            ("BCR (SLA requests per USD)", _f(m.bcr_requests_per_usd, 2), _f(v.bcr_requests_per_usd, 2))]
    parts.append(Fold(f"verification: the promise beside a simulation ({v.requests} requests, seed {v.seed})",
                      ("metric", "planned", "simulated"), rows, right=("planned", "simulated")))
    parts += [Text(f"warning: {w}", style="yellow") for w in v.warnings]
    if v.perturbed:
        from placer.perturb import spread_words

        parts.append(plain(f"robustness: {spread_words(v.perturbed, v.perturbation or 0.0)}"))
    return Group(*parts)


def perturb_view(plan: Plan, fraction: float) -> Fold:
    """``placer evaluate --perturb``: each perturbed run's chip speeds and simulated figures."""
    v = plan.verification
    rows = [("nominal", _f(v.ttft_p90_s), f"{100 * v.sla_attainment:.1f} %", _f(v.bcr_requests_per_usd, 2))]
    rows += [(", ".join(f"{c} x{f:.2f}" for c, f in r.speed_factors.items()), _f(r.ttft_p90_s),
              f"{100 * r.sla_attainment:.1f} %", _f(r.bcr_requests_per_usd, 2)) for r in v.perturbed]
    return Fold(f"chip speeds off by ±{100 * fraction:g} % (simulated, {v.requests} requests each)",
                ("chip speeds", "TTFT P90 s", "SLA attainment", "BCR req/USD"), rows,
                right=("TTFT P90 s", "SLA attainment", "BCR req/USD"))
