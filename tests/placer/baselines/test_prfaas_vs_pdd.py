"""PrfaaS (decode local, long uncached prompts prefilled remotely) against PDD, planned and
simulated as ``placer simulate`` runs plans (issue 45, part 1).

PrfaaS's threshold is enforced: its remote P pools admit only the classes with at least θ uncached
tokens ("set" queues). PDD's own set queues (the heavy and the light classes of a chip, issue 45)
split the classes only along that chip's light line (prefill ≤ 25 % of the TTFT budget): where
PrfaaS's θ falls elsewhere — here both classes are light on the H100, so no PDD queue takes the long
prompts alone there — PrfaaS may beat PDD. "PrfaaS wins":
its plan is at least PDD's (RelayDecode has nothing to add) and beats every other baseline; "PDD
wins": the relay and decode elsewhere are worth more than PrfaaS can reach."""

from __future__ import annotations

import pytest

from bench.agreement_cases import small_pdd_dict
from placer.baselines import solve_baseline
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim.config import SimConfig
from placer.sim.engine import simulate
from placer.specs import parse_scenario

CONFIG = SolveConfig(time_limit_s=10.0, marginals=False)
SIM = SimConfig(requests=3000, seed=7)

#: A compute-rich remote cluster (dc-a: H100, $3/h) and a local bandwidth-rich decode one
#: (dc-b: H20 at $0.80/h, slow at prefill), 30 % of prompts long and cold (13K uncached
#: tokens), a line wide enough for their KV within a TTFT budget the transfer fits in: the
#: long prefills go where compute is, decode stays where bandwidth is cheap, and nothing is
#: left for a relay to hide.
PRFAAS_WINS = {
    "name": "prfaas-wins", "model": "llama-3.1-8b", "kv_dtype": "bf16",
    "chips": [{"name": "H20", "base": "H20", "price_usd_per_h": 0.80}],
    "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 8}}, {"name": "dc-b", "inventory": {"H20": 32}}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 100, "rtt_ms": 30, "jitter_ms": 3}],
    "workload": {"arrival_rps": 12.0, "classes": [
        {"name": "long-cold", "share": 0.3, "input_tokens": 16384, "output_tokens": 256, "hit_rate": 0.2},
        {"name": "short-warm", "share": 0.7, "input_tokens": 4096, "output_tokens": 512, "hit_rate": 0.9}]},
    "sla": {"ttft_p90_s": 3.0, "tpot_s": 0.03},
    "options": {"tp_degrees": [1, 2]},
}


def _solved(data: dict, names: tuple[str, ...]) -> dict:
    """name → (plan, simulated figures) for PDD and the named baselines."""
    problem = resolve(parse_scenario(data))
    out = {}
    for name in names:
        plan = optimize(problem, CONFIG) if name == "pdd" else solve_baseline(problem, name, CONFIG)
        out[name] = (plan, simulate(problem, plan, SIM).data)
    return out


def _bcr(entry) -> tuple[float, float]:
    plan, sim = entry
    return plan.metrics.bcr_requests_per_usd, sim["bcr_requests_per_usd"]


def test_prfaas_wins_with_remote_compute_local_bandwidth_and_long_uncached_prompts():
    runs = _solved(PRFAAS_WINS, ("pdd", "prfaas", "same-dc-pd", "agg"))
    plan, sim = runs["prfaas"]
    assert {p.datacenter for p in plan.pools if p.role == "MD" and p.count > 0} == {"dc-b"}  # decode local
    # the threshold enforced: the long, cold prompts (13,107 uncached tokens) all remote, the rest all local
    assert plan.model_extra["baseline"]["threshold_uncached_tokens"] == 13107
    sides = {(r.request_class, r.src) for r in plan.routes if r.rps > 0}
    assert sides == {("long-cold", "dc-a"), ("short-warm", "dc-b")}
    assert plan.metrics.served_rps == pytest.approx(12.0, rel=1e-3) and sim["sla_attainment"] >= 0.9
    planned, simulated = _bcr(runs["prfaas"])
    pdd_planned, pdd_simulated = _bcr(runs["pdd"])
    # PDD finds nothing better (before the threshold was enforced the two were the same plan; now
    # prfaas is ahead: 4246 vs 4154 planned, 4270 vs 4131 simulated — PDD's heavy queue needs a
    # class that is not light on the chip, and on the H100 none is)
    assert planned >= 0.99 * pdd_planned and simulated >= 0.97 * pdd_simulated
    assert not any(p.role == "RLD" and p.count > 0 for p in runs["pdd"][0].pools)
    for other in ("same-dc-pd", "agg"):
        assert planned > 1.2 * _bcr(runs[other])[0] and simulated > 1.2 * _bcr(runs[other])[1], other


def test_pdd_wins_on_high_hit_agentic_contexts_with_bandwidth_rich_remote_decode():
    """SMALL_PDD: 97 %-hit contexts, H20 decode across a 10 Gbit/s line, a 1 s TTFT budget: the
    relay streams first tokens while the KV crosses; PrfaaS, without it, carries a fraction."""
    runs = _solved(small_pdd_dict(), ("pdd", "prfaas"))
    pdd, pdd_sim = runs["pdd"]
    prfaas, prfaas_sim = runs["prfaas"]
    assert pdd.metrics.served_rps == pytest.approx(24.0, rel=1e-3)
    assert any(p.role == "RLD" and p.count > 0 for p in pdd.pools)
    assert prfaas.metrics.served_rps < 0.5 * pdd.metrics.served_rps
    assert pdd.metrics.bcr_requests_per_usd > 1.2 * prfaas.metrics.bcr_requests_per_usd
    assert pdd_sim["bcr_requests_per_usd"] > 1.2 * prfaas_sim["bcr_requests_per_usd"]
    assert pdd_sim["served_rps"] > 1.5 * prfaas_sim["served_rps"]
