"""A finished run → the Simulation JSON of docs/contracts.md (and a readable table).

Contract keys: ``requests``, ``ttft_p50_s``, ``ttft_p90_s``, ``ttft_p99_s``,
``tpot_p50_s``, ``tpot_p90_s``, ``sla_attainment``, ``goodput_rps``,
``bcr_requests_per_usd``, ``rld_token_share``, ``handoffs`` (counts per mode), ``links``
(mean and peak Gbit/s), ``pools`` (utilisation). Extensions: ``routes`` (the same
figures per pipeline and line), hit rates on both sides, queue and link time series,
``served_rps``/``offered_rps``, the seed. Wall-clock time is kept out of the JSON so
that the same seed gives byte-identical output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from placer.pdd import P, ROLES
from placer.shapes import kind_of


def _r(x: float, digits: int = 6) -> float:
    return round(float(x), digits)


@dataclass
class SimResult:
    data: dict
    wall_s: float = 0.0  # wall-clock seconds of the run (kept out of the JSON)

    def __getitem__(self, key: str):
        return self.data[key]

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.data, indent=indent)

    def route(self, pipeline: str, src: str | None = None, dst: str | None = None) -> list[dict]:
        return [r for r in self.data["routes"] if r["pipeline"] == pipeline
                and (src is None or r["src"] == src) and (dst is None or r["dst"] == dst)]


def _align(series_list: list) -> None:
    """Bring time series to one bin width and length."""
    width = max(s.width for s in series_list)
    for s in series_list:
        while s.width < width * (1 - 1e-9):
            s._coarsen()
    n = max(len(s.values) for s in series_list)
    for s in series_list:
        s.values.extend([0.0] * (n - len(s.values)))


def _pool_row(pool, t_end: float) -> dict:
    """One pool's figures: utilisation and queue; P forwards; decode batch, tokens, extends, DRC hits."""
    row = {"role": pool.role, "datacenter": pool.dc, "chip": pool.chip, "tp": pool.tp, "count": pool.count}
    if kind_of(pool.tp):  # the plan row's instance shape, where it names one (tp stays the chip count)
        row["shape"] = kind_of(pool.tp)
    insts = pool.instances
    if pool.role == P:
        busy = sum(i.busy_s for i in insts)
        row.update(utilization=_r(busy / (pool.count * t_end)),
                   mean_queue=_r(sum(i.q_area for i in insts) / (pool.count * t_end)),
                   max_queue=max(i.q_max for i in insts),
                   forwards=sum(i.forwards for i in insts))
        return row
    batch = sum(i.batch_area for i in insts) / (pool.count * t_end)
    row.update(utilization=_r(batch / pool.design_batch) if pool.design_batch else 0.0,
               busy_fraction=_r(sum(i.busy_s for i in insts) / (pool.count * t_end)),
               mean_batch=_r(batch, 3), max_batch=max(i.batch_max for i in insts),
               design_batch=pool.design_batch,
               mean_queue=_r(sum(i.q_area for i in insts) / (pool.count * t_end)),
               max_queue=max(i.q_max for i in insts),
               tokens=sum(i.tokens for i in insts),
               extends=sum(i.extends for i in insts))
    caches = [i.cache for i in insts if i.cache is not None]
    if caches:
        q = sum(c.query_tokens for c in caches)
        row["drc_hit_rate"] = _r(sum(c.hit_tokens for c in caches) / q) if q else 0.0
    return row


def _link_row(s: str, d: str, link, t_end: float) -> dict:
    """One line direction: capacity, mean and peak Gbit/s, busy fraction, transfers."""
    if link.flows == 0 and link.bytes_total == 0:
        peak = 0.0
    else:
        peak = max(link.series.values) / link.series.width * 8 / 1e9
    return {"src": s, "dst": d, "gbit_per_s_capacity": _r(link.rate * 8 / 1e9),
            "mean_gbit_per_s": _r(link.bytes_total * 8 / 1e9 / t_end),
            "peak_gbit_per_s": _r(peak), "busy_fraction": _r(link.busy_s / t_end),
            "transfers": link.flows, "peak_concurrent_transfers": link.peak_flows}


def _route_rows(sim, served_rps: float) -> list[dict]:
    """TTFT quantiles, SLA attainment and goodput per route (pipeline, source, destination)."""
    measured = sim.measured
    routes = []
    for i, rk in enumerate(sim.router.routes):
        sk = sim.route_ttft[i]
        if sk.n == 0:
            continue
        routes.append({"pipeline": rk.pipeline, "src": rk.src, "dst": rk.dst, "requests": sk.n,
                       "share": _r(sk.n / measured) if measured else 0.0,
                       "ttft_p50_s": _r(sk.quantile(0.5)), "ttft_p90_s": _r(sk.quantile(0.9)),
                       "ttft_p99_s": _r(sk.quantile(0.99)),
                       "sla_attainment": _r(sim.route_good[i] / sk.n),
                       "goodput_rps": _r(served_rps * sim.route_good[i] / measured) if measured else 0.0})
    return routes


def _series(sim) -> dict:
    """Queue lengths and link Gbit/s over time, on one bin width (aligns the series in place)."""
    series_list = [p.series for p in sim.pools.values()] + [link.series for link in sim.links.values()]
    _align(series_list)
    width = series_list[0].width
    return {
        "bin_s": _r(width),
        "t_s": series_list[0].times(),
        "queues": {p.label: [int(v) for v in p.series.values] for p in sim.pools.values()},
        "links_gbit_per_s": {f"{s}->{d}": [_r(v / width * 8 / 1e9, 4) for v in link.series.values]
                             for (s, d), link in sim.links.items()},
    }


def collect(sim, wall_s: float) -> SimResult:
    """The Simulation JSON of a finished run ``sim`` (a :class:`~placer.sim.engine.Simulation`)."""
    t_end = max(sim.t_end, 1e-9)
    for pool in sim.pools.values():
        for inst in pool.instances:
            inst.finish_stats(t_end)
    for link in sim.links.values():
        link.finish_stats(t_end)
    measured = sim.measured
    # the offered rate times the share of measured requests served (rejected ones are not), so
    # served never exceeds offered (the sample's own arrival rate carries its Poisson noise)
    served_rps = sim.offered_rps * (measured - sim.rejected_measured) / measured if measured else 0.0
    attainment = sim.good / measured if measured else 0.0
    goodput = sim.offered_rps * attainment
    cost = sum(p.im.price_usd_per_h * p.count for p in sim.pools.values())
    pools = [_pool_row(pool, t_end)
             for pool in sorted(sim.pools.values(), key=lambda p: (p.dc, ROLES.index(p.role), p.chip, p.tp))]
    links = [_link_row(s, d, link, t_end) for (s, d), link in sim.links.items()]
    routes = _route_rows(sim, served_rps)
    series = _series(sim)  # after the links: their peaks are read at the native bin width
    cfg = sim.config
    data = {
        "requests": sim.arrived,
        "measured_requests": measured,
        "rejected_requests": sim.rejected,
        "ttft_p50_s": _r(sim.ttft.quantile(0.5)),
        "ttft_p90_s": _r(sim.ttft.quantile(0.9)),
        "ttft_p99_s": _r(sim.ttft.quantile(0.99)),
        "ttft_mean_s": _r(sim.ttft.mean),
        "tpot_p50_s": _r(sim.tpot.quantile(0.5)),
        "tpot_p90_s": _r(sim.tpot.quantile(0.9)),
        "sla_attainment": _r(attainment),
        "goodput_rps": _r(goodput),
        "served_rps": _r(served_rps),
        "offered_rps": _r(sim.offered_rps),
        "cost_usd_per_h": _r(cost),
        "bcr_requests_per_usd": _r(goodput * 3600 / cost) if cost > 0 else 0.0,
        "rld_token_share": _r(sim.tokens_rld / sim.tokens_total) if sim.tokens_total else 0.0,
        "handoffs": dict(sim.handoffs),
        "p_hit_rate": _r(sim.hit_tokens_p / sim.input_tokens) if sim.input_tokens else 0.0,
        "drc_hit_rate": _r(sim.hit_tokens_drc / sim.input_tokens) if sim.input_tokens else 0.0,
        "simulated_s": _r(t_end),
        "links": links,
        "pools": pools,
        "routes": routes,
        "series": series,
        "seed": cfg.seed,
        "workload": cfg.workload,
        "sla": {"ttft_p90_s": sim.problem.ttft_p90_s, "tpot_s": sim.problem.tpot_s},
    }
    return SimResult(data, wall_s)
