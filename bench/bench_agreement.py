"""ILP vs simulator, per pipeline: the relay-heavy test cases and the bundled examples (issue 14, part 3).

    .venv/bin/python bench/bench_agreement.py [--cases 5g-low-hit,pdd-two-dc,...]
        [--requests 30000] [--seed 7] [--breakdown] [--queues]
    .venv/bin/python bench/bench_agreement.py --random 40 [--seed 7] [--time-limit 20]
        [--plans-dir DIR] [--only 28,29,30] [--pools] [--queues] [--no-steady]

For each case (default: the four cases of ``bench/agreement_cases.py``, which
``tests/placer/sim/test_relay_agreement.py`` checks too, then
``examples/pdd-two-dc.yaml`` and ``examples/eight-dc.yaml``) solves the optimal plan
(``optimize``, no marginals), replays it in the simulator (runs of seeds ``--seed``, ``+ 1`` … pooled as the
random rows are, below; one seed with ``--breakdown`` or ``--queues``) and prints
:func:`placer.sim.verify.agreement`: the mix's P90 TTFT, goodput and RLD token share, ILP
beside simulator, then every route (pipeline, source → destination) with its req/s, simulated
requests and the relative errors of its P90 TTFT and goodput (simulated / ILP − 1).

``--breakdown`` adds, for every route over a line, each class's simulated TTFT from each of its P pools
split into its P side (queue wait + prefill, arrival → KV leaves P) and the line's excess over the unloaded
transfer, beside the plan's law for the class's flows from that pool: its deterministic part, the excess's
mean and standard deviation (:meth:`placer.flows.Route.first_token_law`) and its P90 with and without that
excess, then the P wait (the P side less the prompt's prefill alone on that pool) beside the pool's queue law.
Each pool apart: a set queue whose classes lie on two pools at different utilisations (the flagship's heavy
queue on a tp16 and a tp32 pool) is two laws. It times requests by wrapping the simulator's line and engine
for the run (read only). ``--queues`` (``bench/agreement_queues.py``) prints every P instance's P side past
prefill per class beside its queue's law, then each class's TTFT P90 planned, planned without the decoders'
KV wait and simulated (first each route's, also without the line's excess) — which side of a TTFT error is the
P queues' (rnd-7-33's −28 %: the decoders').

``--random N`` instead draws N scenarios (``bench/random_scenarios.py``, seeded by ``--seed``:
mixed catalog fleets, relay-paying two-dc settings, the bundled Mooncake trace), solves each
within ``--time-limit`` s (those the planner refuses or cannot solve in time are counted and
skipped), simulates it and prints one line a scenario, then the distribution of the relative
errors (simulated / ILP − 1) of TTFT P90 and goodput: over the scenarios' mixes, per pipeline
and per pool type (the route's P pool: same-dc or over a line) — median |error|, P90, max,
the share within 10 % and the count beyond 25 % (``bench/agreement_stats.py``). With
``--plans-dir DIR`` each scenario is solved once: its loaded scenario and plan (or why it was
skipped) are kept in ``DIR/<name>.json`` and read back by later runs with the same seed and time
limit, so before/after runs are paired (the same plans, each promise evaluated afresh; the key is the draw and
the time limit, not the code: after a change to the MILP, delete the files of the scenarios whose cached plan it
no longer admits, e.g. those `validate` now flags, to re-solve them); ``--only``
runs a subset of the N draws (their indices). ``--pools`` prints, under each scenario, every busy decode
pool's design batch (at the mix and at the classes it serves), the plan's settled batch and KV-wait share beside
the simulated batch, KV fill and share of arrivals that waited (``bench/agreement_pools.py``), and their
distribution. Each random run is warmed up past the decode pools' fill (twice the longest time a decoder takes to
forget what it holds, ``agreement_pools.forget_s``: a stay ÷ φ, × 4/β² where a line waits for KV; a trace two stays), so the
measured window sees the KV the plan promises: a 30,000-request run of a long-output scenario from empty ends
before its decoders fill (rnd-7-33's plan: P90 −25.7 % from empty, +5.4 % warmed up; rnd-7-5's plan before C6's
step row: goodput +268 % from empty, its pools past the TPOT); and measured over at least three such stays
(``agreement_pools.MEASURED_STAYS``), or one relaxation time where that is longer: a decoder's KV wanders on that time scale, so a shorter window sees one
level of it (rnd-7-33's re-solved plan: 60 s of 157 s stays, no arrival waited for KV, P90 −48 %; over three
stays 27 % wait, +78 %); ``--no-steady`` measures from empty. Three stays are still one window of the decoders'
occupancy (rnd-7-33's: 0-50 % of arrivals wait for KV over one, 17.2 % over 150), so each row is judged on the
requests of runs of seeds ``--seed``, ``+ 1`` … pooled, each warmed up apart: 3 at least, more until the pooled
P90's jackknife error is under 3 %, 16 at most (a trace's replays: 8 … 32; ``bench/pooled_seeds.py``), the seeds
printed on the row and their spread under it; a row whose pooled P90's jackknife error stays above 5 % prints
``unsettled`` (its error is its window's, not the plan's; the summary repeats the mix over settled rows);
``--pools`` and ``--queues`` run one seed.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

from placer.evaluate import analyze
from placer.flows import Route, instance
from placer.p_queues import mixture_quantile
from placer.pdd import P_D, P_MD
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.sim import engine as sim_engine
from placer.sim import links as sim_links
from placer.sim.router import PIPE_CODE
from placer.sim.verify import agreement
from placer.specs import load_scenario, parse_scenario
from placer.ttft_tail import LengthMixTail, SplitTail
from agreement_cases import CASES, small_pdd_dict  # noqa: I001 - siblings under bench/ (the script's folder)
from agreement_queues import print_queues, print_routes, simulate_queues
from pooled_seeds import pooled_runs

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DEFAULT = [*CASES, "pdd-two-dc", "eight-dc"]


def problem_of(name: str):
    """A test case by name, else ``examples/<name>.yaml``."""
    if name in CASES:
        return resolve(parse_scenario(small_pdd_dict(**CASES[name])))
    return resolve(load_scenario(EXAMPLES / f"{name}.yaml"))


@contextmanager
def timed_transfers(times: dict):
    """Record, per measured request over a line, (src, dst, pipeline code, input tokens, hit, arrival,
    KV leaves P, KV lands, unloaded transfer s, rtt, first token, its P pool's key) in ``times`` while a
    simulation runs."""
    line_add, landed, finish = sim_links.WanLink.add, sim_engine.Simulation.kv_landed, sim_engine.Simulation._finish
    start: dict = {}

    def add(link, req, n_bytes, t):
        start[req.rid] = (link.src, link.dst, t, n_bytes / link.rate, link.rtt_s)
        return line_add(link, req, n_bytes, t)

    def kv_landed(sim, req, t):
        start[req.rid] = (*start[req.rid][:5], t)
        return landed(sim, req, t)

    def _finish(sim, req, t):
        if req.rid >= sim.warm_n and req.rid in start:
            src, dst, left, unloaded, rtt, lands = start[req.rid]
            times[req.rid] = (src, dst, req.path.pipe, req.n_in, req.hit, req.t_arr, left, lands, unloaded, rtt,
                              req.t_first, req.p.pool.key)
        return finish(sim, req, t)

    sim_links.WanLink.add, sim_engine.Simulation.kv_landed, sim_engine.Simulation._finish = add, kv_landed, _finish
    try:
        yield
    finally:
        sim_links.WanLink.add, sim_engine.Simulation.kv_landed, sim_engine.Simulation._finish = line_add, landed, finish


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.9 * (len(ordered) - 1))] if ordered else float("nan")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _tails(tail, weight: float = 1.0) -> list[tuple[float, object]]:
    """(weight, :class:`~placer.ttft_tail.TtftTail`) of a flow's tail: a split over instances or lengths
    opened down to its single tails."""
    if isinstance(tail, SplitTail):
        return [x for w, t in tail.parts for x in _tails(t, weight * w)]
    if isinstance(tail, LengthMixTail):
        return [x for p, _, t in tail.parts for x in _tails(t, weight * p)]
    return [(weight, tail)]


def _quantile(parts: list[tuple[float, object]], p: float) -> float:
    """The ``p`` quantile of a mixture of wait laws ((weight, law), weights summing to 1; bisection)."""
    lo, hi = 0.0, 600.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(w * law.prob_exceeds(mid) for w, law in parts) > 1 - p else (lo, mid)
    return lo


def breakdown_rows(problem, plan, times: dict) -> list[dict]:
    """Per class, route over a line (P-MD, P-D) and P pool: the simulated P side, line excess, P wait (the P
    side less the prompt's prefill alone on that pool) and decoder admission wait beside the plan's law for
    the class's flows from that pool — each pool apart, as each queues at its own utilisation."""
    flows = [f for f in analyze(problem, plan).flows if f.p_pool[1] != f.dst and f.pipeline in (P_MD, P_D)]
    out = []
    for c in problem.classes:
        mine_c = [f for f in flows if f.request_class == c.name]
        for pipe, src, dst, pool in sorted({(f.pipeline, f.p_pool[1], f.dst, f.p_pool) for f in mine_c}, key=str):
            mine = [f for f in mine_c if (f.pipeline, f.p_pool[1], f.dst, f.p_pool) == (pipe, src, dst, pool)]
            rows = [r for r in times.values() if (r[0], r[1], r[2], r[3]) == (src, dst, PIPE_CODE[pipe], c.input_tokens)
                    and abs(r[4] - c.hit_rate) < 1e-9 and r[11] == pool]
            im = instance(problem, pool.chip, pool.tp)
            total = sum(f.rps for f in mine)
            tails = [(f.rps / total * w, t) for f in mine for w, t in _tails(f.wait)]
            waits = [(w, t.wait) for w, t in tails]
            kv_bytes = Route(problem, c, pipe, src, dst, problem.options.drc).wan_bytes()
            out.append(dict(
                cls=c.name, pipeline=pipe, src=src, dst=dst, pool=pool, n=len(rows),
                unloaded_s=kv_bytes / problem.links[(src, dst)].bytes_per_s,
                sim_side=[r[6] - r[5] for r in rows], sim_excess=[r[7] - r[6] - r[8] - r[9] for r in rows],
                sim_wait=[r[6] - r[5] - im.prefill_s(r[3], r[4]) for r in rows],
                sim_admit=[r[10] - r[7] for r in rows if r[10] is not None],
                det_s=sum(f.rps * f.det_s for f in mine) / total,
                excess_mean_s=sum(w * t.wan_excess_mean_s for w, t in tails),
                excess_sd_s=sum(w * (t.wan_excess_var_s2 ** 0.5 if t.wan_excess_var_s2 is not None
                                     else t.wan_excess_mean_s) for w, t in tails),
                ttft_p90_s=mixture_quantile(mine, 0.90),
                no_line_p90_s=mixture_quantile([dataclasses.replace(f, wait=f.wait.without_line()) for f in mine],
                                               0.90),
                wait_mean_s=sum(w * law.mean_wait_s for w, law in waits), wait_p90_s=_quantile(waits, 0.9),
                rho=sum(w * law.rho for w, law in waits),
                kv_share=sum(w * t.kv_wait_share for w, t in tails),
                kv_mean_s=sum(w * t.kv_wait_mean_s for w, t in tails)))
    return out


def print_breakdown(problem, plan, times: dict) -> None:
    """:func:`breakdown_rows`, two lines each: the P side and line excess, then the P queue's wait and the
    decoder's admission wait (KV landed → first token), simulated beside the law's."""
    for r in breakdown_rows(problem, plan, times):
        side, excess = r["sim_side"], r["sim_excess"]
        print(f"     {r['cls']:14s} {r['pipeline']} {r['src']}->{r['dst']} P {r['pool'].chip} tp{r['pool'].tp} "
              f"{r['n']:5d} req  unloaded {r['unloaded_s']:.3f} s | sim: P side mean {_mean(side):.3f} P90 "
              f"{_p90(side):.3f}, line excess mean {_mean(excess):.3f} P90 {_p90(excess):.3f} | law: det "
              f"{r['det_s']:.3f}, excess mean {r['excess_mean_s']:.3f} sd {r['excess_sd_s']:.3f}, TTFT P90 "
              f"{r['ttft_p90_s']:.3f} ({r['no_line_p90_s']:.3f} without the line)")
        wait, admit = r["sim_wait"], r["sim_admit"]
        print(f"     {'':14s} P wait sim mean {_mean(wait):.3f} P90 {_p90(wait):.3f} | law mean {r['wait_mean_s']:.3f} "
              f"P90 {r['wait_p90_s']:.3f} (rho {r['rho']:.3f}) | admission wait sim mean {_mean(admit):.3f} P90 "
              f"{_p90(admit):.3f}, law share {r['kv_share']:.3f} mean {r['kv_mean_s']:.3f}")


def print_case(name: str, requests: int, seed: int, breakdown: bool = False, queues: bool = False) -> None:
    start = time.perf_counter()
    problem = problem_of(name)
    plan = optimize(problem, SolveConfig(marginals=False, time_limit_s=120))
    times: dict = {}
    config = SimConfig(requests=requests, seed=seed)
    spread = None
    with timed_transfers(times) if breakdown else nullcontext():
        if queues:
            sim, run, sides, ttfts = simulate_queues(problem, plan, config)
        elif breakdown:
            sim = simulate(problem, plan, config)
        else:  # the seeds pooled as --random judges its rows: one 30k-request seed read the flagship's window
            sim, spread = pooled_runs(problem, plan, config)  # (-16.8 % on seed 7; -7.1 % on 300k requests)
    a = agreement(problem, plan, sim)
    print(f"== {name}: mix P90 ILP {a['ilp_ttft_p90_s']:.3f} s sim {a['sim_ttft_p90_s']:.3f} s "
          f"({a['ttft_p90_error']:+.1%}); goodput ILP {a['ilp_goodput_rps']:.2f} sim {a['sim_goodput_rps']:.2f} "
          f"req/s ({a['goodput_error']:+.1%}); RLD share ILP {a['ilp_rld_token_share']:.3f} "
          f"sim {sim['rld_token_share']:.3f}  [{time.perf_counter() - start:.0f} s]")
    if spread is not None:
        print(f"   {spread.line()}")
    for r in a["routes"]:
        print(f"   {r['pipeline']:9s} {r['src']}->{r['dst']:<12s} {r['rps']:6.2f} req/s {r['sim_requests']:6d} req  "
              f"P90 ILP {r['ilp_ttft_p90_s']:.3f} sim {r['sim_ttft_p90_s']:.3f} ({r['ttft_p90_error']:+.1%})  "
              f"goodput ({r['goodput_error']:+.1%})")
    if breakdown:
        print_breakdown(problem, plan, times)
    if queues:
        print_routes(problem, plan, a["routes"])
        print_queues(problem, plan, run, sides, ttfts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=0, metavar="N",
                        help="draw N random catalog scenarios (seeded by --seed) instead of --cases")
    parser.add_argument("--time-limit", type=float, default=20.0, help="solver seconds per random scenario")
    parser.add_argument("--plans-dir", type=Path, default=None, metavar="DIR",
                        help="--random: keep each scenario's plan here and reuse it on later runs (paired runs)")
    parser.add_argument("--only", default="", metavar="I,J,...", help="--random: only these draws' indices")
    parser.add_argument("--pools", action="store_true",
                        help="--random: each decode pool's design batch, planned and simulated (issue 42, part 1)")
    parser.add_argument("--steady", action=argparse.BooleanOptionalAction, default=True,
                        help="--random: warm each run up past the decode pools' fill (twice their longest relaxation: "
                             "agreement_pools.forget_s); "
                             "--no-steady: from empty")
    parser.add_argument("--cases", default=",".join(DEFAULT))
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--breakdown", action="store_true",
                        help="per class of each line route and P pool: P side vs line excess")
    parser.add_argument("--queues", action="store_true",
                        help="per P instance and class: the P side past prefill, simulated vs the queue's law; "
                             "per class: TTFT P90 with and without the decoders' KV wait")
    args = parser.parse_args()
    if args.random:
        from agreement_stats import run_random

        only = [int(x) for x in args.only.split(",") if x.strip()]
        run_random(args.random, args.seed, args.requests, args.time_limit, args.plans_dir, only, args.pools,
                   args.steady, args.queues)
        return
    for name in args.cases.split(","):
        print_case(name, args.requests, args.seed, args.breakdown, args.queues)


if __name__ == "__main__":
    main()
