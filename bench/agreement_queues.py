"""Each P queue's law beside the simulator's P instances, and each class's TTFT with the decoders' KV wait
apart: which side of a TTFT error is the P queues' (issue 42) — ``bench_agreement.py --queues``.

in:  a :class:`~placer.problem.Problem`, its :class:`~placer.plan.Plan` and a :class:`~placer.sim.SimConfig`
out: :func:`simulate_queues` (the simulation, with each measured request's P side past its own prefill
     alone per P instance and its TTFT per class), :func:`queue_rows` (per P instance and class: the
     simulated P side's mean and P90 beside the evaluation's law, :func:`placer.queue_laws.p_instance_laws`),
     :func:`class_rows` (per class and the mix: TTFT P90 planned, planned without the decoders' KV wait,
     simulated), :func:`print_queues`

A request's *P side past its prefill* runs from its arrival to the end of the forward that finishes its
prompt, less that prompt's prefill alone on its instance (the simulator's own cost of it): the wait the
P queue's law (:class:`~placer.packed_queue.ClassWait` where prompts pack) prices. Instances that carry the
same queues under the same law are printed once, their requests pooled. Like :mod:`bench_agreement`'s
``--breakdown`` it wraps two of the simulator's methods for the run (read only).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from contextlib import contextmanager

from agreement_routes import INDEPENDENT_PER_RELAXATION  # a sibling under bench/
from placer.evaluate import analyze
from placer.flows import instance
from placer.load_drift import DriftWait, relaxation_s
from placer.p_queues import mixture_quantile, queue_layout
from placer.pdd import P
from placer.queue_laws import new_tokens, p_instance_laws
from placer.sim import engine as sim_engine
from placer.sim import simulate
from placer.sim.events import prefill as sim_prefill

#: Rows with fewer simulated requests than this are not printed (their P90 is noise).
MIN_REQUESTS = 30


@contextmanager
def recorded(sides: dict, ttfts: dict):
    """While a simulation runs: ``sides[id(P instance)]`` ← (path id, P side past its prefill alone) and
    ``ttfts[path id]`` ← TTFT, for each measured request."""
    done, finish = sim_prefill.PrefillEvents.prefill_done, sim_engine.Simulation._finish

    def prefill_done(sim, req, t):
        if req.rid >= sim.warm_n:
            sides[id(req.p)].append((id(req.path), t - req.t_arr - req.p.alone_s(req.n_in, req.new)))
        return done(sim, req, t)

    def _finish(sim, req, t):
        if req.rid >= sim.warm_n and req.t_first is not None:
            ttfts[id(req.path)].append(req.t_first - req.t_arr)
        return finish(sim, req, t)

    sim_prefill.PrefillEvents.prefill_done, sim_engine.Simulation._finish = prefill_done, _finish
    try:
        yield
    finally:
        sim_prefill.PrefillEvents.prefill_done, sim_engine.Simulation._finish = done, finish


def simulate_queues(problem, plan, config):
    """:func:`placer.sim.simulate` the plan; returns (its result, the run's
    :class:`~placer.sim.engine.Simulation`, sides, ttfts), the paths' ids turned into class indices (the
    router's paths per class)."""
    sides: dict = defaultdict(list)
    ttfts: dict = defaultdict(list)
    kept = []

    def build(*args):
        kept.append(sim_engine.Simulation(*args))
        return kept[-1]

    with recorded(sides, ttfts):
        result = simulate(problem, plan, config, simulation_class=build)
    sim = kept[0]
    klass = {id(path): k for k, paths in enumerate(sim.router.paths) for path in paths}
    sides = {inst: [(klass.get(p, -1), s) for p, s in rows] for inst, rows in sides.items()}
    by_class: dict[int, list[float]] = defaultdict(list)
    for p, values in ttfts.items():
        by_class[klass.get(p, -1)].extend(values)
    return result, sim, sides, dict(by_class)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.9 * (len(ordered) - 1))] if ordered else float("nan")


def _instance_laws(problem, plan, pool_key, count: int, laws: dict) -> dict[int, tuple[tuple[str, ...], object]]:
    """Instance index → (the queues it serves, its law) of one P pool, by the layout the router uses."""
    rows = [a for a in plan.assignments if a.role == P and a.rps > 0 and a.key == pool_key]
    queues = {a.queue or "": a.queue_instances for a in rows}
    if any(n is None for n in queues.values()):
        layout = {q: [(i, 1.0 / count) for i in range(count)] for q in queues}
    else:
        layout = queue_layout(queues, count)
    out: dict[int, list] = {}
    for q, parts in layout.items():
        for (i, _), wait in zip(parts, laws.get((*pool_key, q), [])):
            names, _law = out.get(i, ((), None))
            out[i] = (tuple(sorted({*names, q})), wait.law)
    return out


def p90_se(law, requests: int, instances: int, span_s: float) -> float:
    """The relative standard error of a P90 of ``law`` read over ``requests`` simulated requests on ``instances``
    instances in a run of ``span_s`` seconds: √(0.09)/(f(q)·q) ÷ √n, n the requests their queues make independent —
    :data:`~agreement_routes.INDEPENDENT_PER_RELAXATION` an instance a relaxation time of the queue's work
    (:func:`~agreement_routes.relaxation_s`), at most ``requests``. The rows of one group's classes read the same
    queues: their errors move together."""
    q = law.quantile_s(0.9)
    density = (law.prob_exceeds(0.98 * q) - law.prob_exceeds(1.02 * q)) / (0.04 * q) if q > 0 else 0.0
    if density <= 0:
        return float("inf")
    rate = law.rho / law.mean_s if law.mean_s > 0 else 0.0
    relax = relaxation_s(law.rho, rate * law.second_moment_s2)
    independent = requests if relax <= 0 else min(requests, instances * INDEPENDENT_PER_RELAXATION * span_s / relax)
    return 0.3 / (density * q) / max(independent, 1.0) ** 0.5


def _own_law(law, tokens: float):
    """The wait a class's prompts of ``tokens`` new tokens meet under ``law``: a packed queue's own for that length,
    and where the trace drifts the instance's load (:class:`placer.load_drift.DriftWait`) the mixture of its
    points' (:class:`_Mixture`)."""
    if law is None:
        return None
    if isinstance(law, DriftWait):
        return _Mixture(law.base, tuple((w, _own_law(part, tokens)) for w, part in law.points))
    return law.for_tokens(tokens) if hasattr(law, "for_tokens") else law


class _Mixture:
    """A wait law mixed over a drifting instance's loads: mean, P(W > t) and quantiles of the mixture; the
    utilisation and service moments (what :func:`p90_se`'s relaxation reads) its stationary law's."""

    def __init__(self, base, parts):
        self.base, self.parts = base, parts
        self.rho, self.mean_s, self.second_moment_s2 = base.rho, base.mean_s, base.second_moment_s2
        self.mean_wait_s = sum(w * law.mean_wait_s for w, law in parts)

    def prob_exceeds(self, t: float) -> float:
        return sum(w * law.prob_exceeds(t) for w, law in self.parts)

    def quantile_s(self, q: float) -> float:
        lo, hi = 0.0, max(law.quantile_s(q) for _, law in self.parts)
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.prob_exceeds(mid) > 1.0 - q else (lo, mid)
        return hi


def queue_rows(problem, plan, sim, sides: dict) -> list[dict]:
    """Per P pool, group of its instances with the same queues and law, and class: ``n`` simulated requests,
    the simulated P side past prefill (``sim_mean_s``, ``sim_p90_s``, the latter's relative standard error
    ``p90_se``: :func:`p90_se` over the run's measured span) beside the law the class's prompts meet there
    (``law_mean_s``, ``law_p90_s``; the queue's ``rho``)."""
    span_s = max(getattr(sim, "last_arrival_t", 0.0) - (getattr(sim, "first_measured_t", None) or 0.0), 0.0)
    counts = {p.key: p.count for p in plan.pools if p.count > 0}
    models = {key: instance(problem, key.chip, key.tp) for key in counts}
    laws = p_instance_laws(problem, plan, counts, models)
    out = []
    for key, pool in sim.pools.items():
        if key[0] != P or not pool.instances:
            continue
        by_index = _instance_laws(problem, plan, key, pool.count, laws)
        groups: dict[tuple, list] = defaultdict(list)  # (queues, law id) → instance indices
        for i in range(len(pool.instances)):
            names, law = by_index.get(i, ((), None))
            groups[(names, id(law))].append(i)
        for (names, _), members in groups.items():
            law = by_index.get(members[0], ((), None))[1]
            per_class: dict[int, list[float]] = defaultdict(list)
            for i in members:
                for k, side in sides.get(id(pool.instances[i]), []):
                    per_class[k].append(side)
            for k, values in sorted(per_class.items()):
                if k < 0 or len(values) < MIN_REQUESTS:
                    continue
                own = _own_law(law, new_tokens(problem.classes[k]))
                out.append(dict(pool=pool.label, queues=names, instances=members, cls=problem.classes[k].name,
                                n=len(values), sim_mean_s=sum(values) / len(values), sim_p90_s=_p90(values),
                                law_mean_s=own.mean_wait_s if own is not None else float("nan"),
                                law_p90_s=own.quantile_s(0.9) if own is not None else float("nan"),
                                rho=law.rho if law is not None else float("nan"),
                                p90_se=p90_se(own, len(values), len(members), span_s) if own is not None else float("nan")))
    return out


def class_rows(problem, plan, ttfts: dict) -> list[dict]:
    """Per class (and ``cls`` "mix" last): TTFT P90 planned (``ilp_p90_s``), planned without the decoders'
    KV wait (``ilp_no_kv_p90_s``: the flows' tails with no KV wait at their first decoder) and simulated."""
    flows = analyze(problem, plan).flows
    bare = [dataclasses.replace(f, wait=f.wait.with_kv_wait(0.0, 0.0)) if hasattr(f.wait, "with_kv_wait") else f
            for f in flows]
    out = []
    for k, c in enumerate(problem.classes):
        mine = [i for i, f in enumerate(flows) if f.request_class == c.name]
        values = ttfts.get(k, [])
        if not mine or not values:
            continue
        out.append(dict(cls=c.name, n=len(values), ilp_p90_s=mixture_quantile([flows[i] for i in mine], 0.9),
                        ilp_no_kv_p90_s=mixture_quantile([bare[i] for i in mine], 0.9), sim_p90_s=_p90(values)))
    every = [v for k, values in ttfts.items() if k >= 0 for v in values]
    out.append(dict(cls="mix", n=len(every), ilp_p90_s=mixture_quantile(flows, 0.9),
                    ilp_no_kv_p90_s=mixture_quantile(bare, 0.9), sim_p90_s=_p90(every)))
    return out


def route_rows(problem, plan, routes: list[dict]) -> list[dict]:
    """Per route of :func:`placer.sim.verify.agreement` (``routes``): its TTFT P90 planned (``ilp_p90_s``),
    planned without the decoders' KV wait (``ilp_no_kv_p90_s``), without it and the line's excess too
    (``ilp_no_kv_line_p90_s``: the P queues and the deterministic parts alone) and simulated — which law a
    route's error is in."""
    flows = analyze(problem, plan).flows
    out = []
    for r in routes:
        mine = [f for f in flows if (f.pipeline, f.p_pool[1], f.dst) == (r["pipeline"], r["src"], r["dst"])]
        if not mine:
            continue
        bare = [dataclasses.replace(f, wait=f.wait.with_kv_wait(0.0, 0.0)) for f in mine]
        queues = [dataclasses.replace(f, wait=f.wait.without_line()) for f in bare]
        out.append(dict(r, ilp_no_kv_p90_s=mixture_quantile(bare, 0.9),
                        ilp_no_kv_line_p90_s=mixture_quantile(queues, 0.9)))
    return out


def _err(sim: float, law: float) -> str:
    return f"{sim / law - 1:+7.1%}" if law > 0 else "    n/a"


def print_routes(problem, plan, routes: list[dict]) -> None:
    """Each route's TTFT P90 with the decoders' KV wait and the line's excess apart (:func:`route_rows`)."""
    for r in route_rows(problem, plan, routes):
        sim = r["sim_ttft_p90_s"]
        print(f"     route {r['pipeline']} {r['src']}->{r['dst']:<8s} {r['sim_requests']:6d} req  P90 sim {sim:.3f} "
              f"ILP "
              f"{r['ilp_ttft_p90_s']:.3f} ({_err(sim, r['ilp_ttft_p90_s'])}), without the KV wait "
              f"{r['ilp_no_kv_p90_s']:.3f} ({_err(sim, r['ilp_no_kv_p90_s'])}), without it and the line "
              f"{r['ilp_no_kv_line_p90_s']:.3f} ({_err(sim, r['ilp_no_kv_line_p90_s'])})")


def print_queues(problem, plan, sim, sides: dict, ttfts: dict) -> None:
    """The P queues' rows (:func:`queue_rows`), then the classes' TTFT (:func:`class_rows`)."""
    for r in queue_rows(problem, plan, sim, sides):
        names = "+".join(q[:40] for q in r["queues"]) or "-"
        print(f"     {r['pool']} inst {','.join(map(str, r['instances']))} [{names}] rho {r['rho']:.3f}  "
              f"{r['cls']:12s} {r['n']:6d} req  P side past prefill: mean sim {r['sim_mean_s']:.3f} law "
              f"{r['law_mean_s']:.3f} ({_err(r['sim_mean_s'], r['law_mean_s'])}), P90 sim {r['sim_p90_s']:.3f} law "
              f"{r['law_p90_s']:.3f} ({_err(r['sim_p90_s'], r['law_p90_s'])} ± {r['p90_se']:.1%})")
    for r in class_rows(problem, plan, ttfts):
        print(f"     TTFT {r['cls']:12s} {r['n']:6d} req  P90 ILP {r['ilp_p90_s']:.3f} (without the decoders' KV wait "
              f"{r['ilp_no_kv_p90_s']:.3f}) sim {r['sim_p90_s']:.3f} ({_err(r['sim_p90_s'], r['ilp_p90_s'])}; without "
              f"{_err(r['sim_p90_s'], r['ilp_no_kv_p90_s'])})")
