"""`optimize --verify`: simulate the plan, cut what made the late requests, re-solve until the SLA holds."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.ilp.dinkelbach import TARGET_GAP
from placer.problem import resolve
from placer.sim import SimConfig
from placer.sim.verify import blame, verify_plan
from placer.specs import parse_scenario
from placer.validate import validate
from placer.workload import Burstiness
from tests.placer.sim.conftest import small_pdd_dict

#: More chips and a wider line than SMALL_PDD, so that targeted cuts still have a plan.
ROOMY = small_pdd_dict(
    datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 16}}, {"name": "dc-b", "inventory": {"H20": 32}}],
    links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 25, "rtt_ms": 30, "jitter_ms": 3}],
)


def test_bursty_traffic_misses_the_sla_until_verify_cuts_what_made_it_late(seed):
    problem = resolve(parse_scenario(ROOMY))
    lines: list[str] = []
    # the planner assumes Poisson arrivals; bursts of 1.5x the mean break its plan's P90 (at 2x,
    # eight rounds of cuts are not always enough: verify then exits 3 saying so, tested below)
    config = SimConfig(requests=10_000, seed=seed, arrivals="bursty", burstiness=Burstiness(1.5, 0.2, 3.0))
    outcome = verify_plan(problem, None, rounds=6, config=config, log=lines.append)
    first, last = outcome.rounds[0], outcome.rounds[-1]
    assert not first["holds"] and first["sim_ttft_p90_s"] > problem.ttft_p90_s
    assert outcome.holds and last["sim_ttft_p90_s"] <= problem.ttft_p90_s and not outcome.reason
    assert first["cuts"] == "none" and last["cuts"] != "none"  # the cut names pools / lines, not a global cap
    assert any(line.startswith("verify: late requests from") for line in lines)
    # cuts only take plans away, so the planned optimum cannot rise beyond the gap each plan is proven
    # within (TARGET_GAP: ROOMY's first plan 3000.4, after the cuts 3020.5, +0.7 %, once its P pools could
    # split heavy and light classes; the simulated SLA goodput may rise: the first plan's late requests
    # did not count)
    assert last["ilp_bcr_requests_per_usd"] <= first["ilp_bcr_requests_per_usd"] * (1 + TARGET_GAP)
    assert sum(line.startswith("verify round") for line in lines) == len(outcome.rounds)
    note = outcome.plan.notes[-1]
    assert "meets the SLA" in note and f"{len(outcome.rounds)} round(s)" in note
    assert not validate(problem, outcome.plan)


def test_a_plan_that_already_holds_is_kept(small_problem, slack_plan, seed):
    # a plan with ~10 % slack (made for 0.9 s, checked against 1.0 s): it simulates 0.88 s at 40 000
    # requests, so verify keeps it as it is — one round, no cut, no re-solve
    outcome = verify_plan(small_problem, slack_plan, rounds=3, config=SimConfig(requests=40_000, seed=seed))
    assert outcome.holds and len(outcome.rounds) == 1
    assert outcome.rounds[0]["cuts"] == "none" and outcome.rounds[0]["sim_ttft_p90_s"] <= small_problem.ttft_p90_s
    assert outcome.plan.pools == slack_plan.pools


def test_verify_that_cannot_meet_the_sla_exits_3_saying_why(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_pdd_dict()))  # 8 H100 only: no room to cut bursts away
    r = CliRunner().invoke(app, ["optimize", str(scenario), "--no-marginals", "--verify", "--verify-arrivals",
                                 "bursty", "--verify-requests", "6000", "--verify-rounds", "2", "--json"])
    assert r.exit_code == 3, r.output
    assert "could not make the simulated P90 TTFT meet the SLA" in r.stderr
    assert "re-solve" in r.stderr or "no plan once" in r.stderr
    assert r.stdout == ""  # no plan is printed as if it held


def _sim(routes, pools=(), peak=10.0):
    return {"routes": [dict(zip(("pipeline", "src", "dst", "ttft_p90_s"), r)) for r in routes],
            "pools": [{"role": r, "datacenter": d, "chip": "H100-SXM", "tp": 1, "mean_queue": q}
                      for r, d, q in pools],
            "links": [{"src": "a", "dst": "b", "peak_gbit_per_s": peak, "gbit_per_s_capacity": 25.0}]}


def test_blame_tells_a_slow_line_from_a_long_prefill_queue():
    pools = [("P", "a", 2.0), ("MD", "b", 0.0)]
    # local traffic from the same P queue is on time: the line made the remote requests late
    line = blame(_sim([("P-MD", "a", "a", 0.8), ("P-MD", "a", "b", 3.0)], pools), sla=1.0)
    assert [(c.kind, c.key) for c in line] == [("line", ("a", "b"))]
    # local traffic is late too: the P queue did it
    queue = blame(_sim([("P-MD", "a", "a", 2.5), ("P-MD", "a", "b", 3.0)], pools), sla=1.0)
    assert {(c.kind, c.key) for c in queue} == {("pool", ("P", "a", "H100-SXM", 1))}
    # a decode pool where requests wait for slots is named as well
    slots = blame(_sim([("P-MD", "a", "a", 2.5)], [("P", "a", 2.0), ("MD", "a", 4.0)]), sla=1.0)
    assert ("pool", ("MD", "a", "H100-SXM", 1)) in {(c.kind, c.key) for c in slots}
