"""The executor's per-request costs as the planner prices them (placer.executor_costs) vs the simulator's charge."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from types import SimpleNamespace

import pytest

from placer.executor_costs import (expected_latest_s, first_token_added_s, frame_offsets_s, message_turn_s, reach_s,
                                   step_wait_s, stream_step_s, tokens_excess_s)
from placer.evaluate import analyze
from placer.executor_runtime import ExecutorRuntime
from placer.flows import Route, decode_design, instance
from placer.optimize import evaluate_plan
from placer.plan import Plan
from placer.problem import resolve
from placer.sim import SimConfig
from placer.sim.engine import Simulation, simulate
from placer.sim.links import WanLink
from placer.specs import parse_scenario
from tests.placer.sim_tpot import simulated_tpot

RUNTIME = {"cores": 8, "slowdown": 1.0, "request_overhead_s": 0.004, "ttft_overhead_s": 0.002,
           "kv_export_bytes_per_s": 4e9, "kv_import_bytes_per_s": 6e9, "kv_export_fixed_s": 0.0005,
           "kv_import_fixed_s": 0.0006, "token_stream_s": 0.0, "wan_frame_bytes": 65536, "wan_latency_s": 0.0016,
           "wan_latency_s_per_byte": 3.5e-10, "source": "a test's figures"}
RTT_S, JITTER_S, LINE_BYTES_PER_S = 0.030, 0.005, 25e6  # bench_serve's line: 200 Mbit/s, 30 ms, 5 ms jitter


def _line(runtime=None, batch: int = 0, step_s: float = 0.0):
    """A WanLink on a stub engine (the executor's runtime, a decoder of ``batch`` sequences stepping ``step_s``)."""
    engine = SimpleNamespace(runtime=runtime, host=SimpleNamespace(busy=0))
    link = WanLink(engine, "dc-a", "dc-b", LINE_BYTES_PER_S, RTT_S, JITTER_S, None, random.Random(7))
    dec = SimpleNamespace(B=batch, step=step_s)
    return link, dec


def test_a_kv_s_in_order_release_is_the_simulator_s_draws_on_average():
    # a 1.6 MB KV crosses in 25 frames 2.6 ms apart: its last frame waits for the slowest of the 15 in reach
    rt = ExecutorRuntime.from_dict(RUNTIME)
    link, _ = _line(rt)
    n_bytes = 1.6e6
    drawn = []
    for i in range(20_000):
        req = SimpleNamespace(p=None, md=None, xfer=n_bytes, flow=None)
        drawn.append(link._kv_release(req, 10.0 * i, 1, rt.wan_frame_bytes) - RTT_S / 2)
    frames = frame_offsets_s(n_bytes, rt.wan_frame_bytes, rt.wan_frame_bytes / LINE_BYTES_PER_S,
                             reach_s(RTT_S, JITTER_S))
    priced = expected_latest_s(RTT_S / 2, JITTER_S, frames) - RTT_S / 2
    assert priced == pytest.approx(2.37e-3, abs=0.05e-3)  # about half a jitter sigma: worth pricing
    assert priced == pytest.approx(statistics.fmean(drawn), abs=0.1e-3)  # the draws' mean within 0.1 ms


def test_the_first_token_behind_a_busy_decoder_s_tokens_is_the_simulator_s_draws_on_average():
    # the first token's way back, in order behind 3 sequences' Tokens messages per 12 ms step
    rt = ExecutorRuntime.from_dict(RUNTIME)
    link, dec = _line(rt, batch=3, step_s=0.012)
    n_bytes = 1.6e6
    drawn = [link._t0_back(SimpleNamespace(md=dec, xfer=n_bytes), rt) - RTT_S / 2 for _ in range(20_000)]
    priced = tokens_excess_s(RTT_S / 2, JITTER_S, rt.import_s(n_bytes), (3, 0.012), reach_s(RTT_S, JITTER_S))
    assert priced == pytest.approx(statistics.fmean(drawn), abs=0.1e-3)
    assert priced > 4e-3  # the max of 4 messages' jitter, less the import's lead
    # the route's price holds it, and the KV's wait for that decoder's step in progress (a 1 s prefill outlasts
    # the pull: the order's wait for a step does not show)
    added = first_token_added_s(rt, 1.0, n_bytes, (RTT_S, JITTER_S, LINE_BYTES_PER_S), (3, 0.012))
    alone = first_token_added_s(rt, 1.0, n_bytes, (RTT_S, JITTER_S, LINE_BYTES_PER_S), None)
    assert added - alone == pytest.approx(priced + step_wait_s((3, 0.012)), abs=1e-5)
    assert step_wait_s((3, 0.012)) == pytest.approx((1 - math.exp(-3)) * 0.006)


@pytest.mark.parametrize("rho", [0.2, 0.6])
def test_the_order_s_turn_on_a_shared_line_is_the_simulator_s_charge_at_the_line_s_load(rho):
    # the relay sends one frame at a time round robin: a message joining n transfers waits (1/2 + n) frames
    # (WanLink.message_s); n in flight is geometric on a processor-shared line at utilisation rho
    rt = ExecutorRuntime.from_dict(RUNTIME)
    link, _ = _line(rt)
    link.jitter_s = 0.0
    alone = link.message_s(queued=False)
    charged = 0.0
    for n in range(400):
        link.n = n
        charged += (1 - rho) * rho ** n * (link.message_s() - alone)
    assert message_turn_s(rt.wan_frame_bytes, LINE_BYTES_PER_S, rho) == pytest.approx(charged, rel=1e-9)


def _cross_dc(jitter_ms: float, output_tokens: int = 2, rps: float = 0.5):
    """One class over a jittery line; by default light load and 2-token answers: the decoder stays idle, so the
    executor's costs are its rule's terms alone (no step to wait for, no Tokens message ahead)."""
    scenario = parse_scenario({
        "name": "line", "model": "llama-3.1-8b", "kv_dtype": "bf16",
        "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 2}}, {"name": "dc-b", "inventory": {"H100-SXM": 2}}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 2.0, "rtt_ms": 30, "jitter_ms": jitter_ms}],
        "workload": {"arrival_rps": rps, "classes": [
            {"name": "c", "share": 1.0, "input_tokens": 160, "output_tokens": output_tokens, "hit_rate": 0.0}]},
        "sla": {"ttft_p90_s": 5.0, "tpot_s": 0.5}, "options": {"tp_degrees": [1], "drc": False}})
    plan = Plan.model_validate({"scenario": "line", "pools": [
        {"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1},
        {"role": "MD", "datacenter": "dc-b", "chip": "H100-SXM", "tp": 1, "count": 1}],
        "routes": [{"request_class": "c", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-b", "rps": rps}]})
    return scenario, plan


def _mean_ttft(scenario, plan, runtime) -> float:
    got = []

    class Timed(Simulation):
        def _finish(self, req, t):
            if req.rid >= self.warm_n:
                got.append(req.t_first - req.t_arr)
            super()._finish(req, t)

    simulate(scenario, plan, SimConfig(requests=3000, seed=3, runtime=runtime), simulation_class=Timed)
    return statistics.fmean(got)


def test_the_planner_s_executor_terms_are_what_the_simulator_adds_over_a_jittery_line():
    # the same plan simulated without and with the executor's runtime: the mean first token moves by what the
    # route's deterministic TTFT gains from the runtime (the pull's round trip, the frames' release, the socket
    # path, the way back, the export and import), within 1 ms of its ~55 ms
    scenario, plan = _cross_dc(jitter_ms=5.0)
    rt = ExecutorRuntime.from_dict(RUNTIME)
    problem = dataclasses.replace(resolve(scenario), runtime=rt)
    im = instance(problem, "H100-SXM", 1)
    route = Route(problem, problem.classes[0], "P-MD", "dc-a", "dc-b", False, im, im)
    priced = route.executor_s(im.prefill_s(160, 0.0))
    simulated = _mean_ttft(scenario, plan, rt) - _mean_ttft(scenario, plan, None)
    assert priced == pytest.approx(0.055, abs=0.003)  # a third of the ~150 ms first token: worth pricing
    assert priced == pytest.approx(simulated, abs=1e-3)


@pytest.mark.parametrize("output_tokens,rps", [(64, 1.0), (256, 2.0)])  # the decoder stepping 34 % and 97 % of the time
def test_evaluate_prices_a_busy_decoder_s_step_and_tokens_as_the_simulator_charges_them(output_tokens, rps):
    # a busy decoder handles the order and the KV between two steps, and the first token's message follows its
    # Tokens messages back: evaluate settles the batch, the route prices both; the simulator agrees within 1 ms
    scenario, plan = _cross_dc(5.0, output_tokens, rps)
    rt = ExecutorRuntime.from_dict(RUNTIME)
    bare = resolve(scenario)
    given = dataclasses.replace(bare, runtime=rt)
    det = [analyze(p, evaluate_plan(p, plan)).flows[0].det_s for p in (bare, given)]
    simulated = _mean_ttft(scenario, plan, rt) - _mean_ttft(scenario, plan, None)
    assert det[1] - det[0] == pytest.approx(simulated, abs=1e-3)


def test_without_a_runtime_a_route_s_first_token_is_unchanged():
    scenario, _ = _cross_dc(jitter_ms=5.0)
    problem = resolve(scenario)
    im = instance(problem, "H100-SXM", 1)
    route = Route(problem, problem.classes[0], "P-MD", "dc-a", "dc-b", False, im, im)
    assert route.executor_s(0.01) == 0.0


def _mean_tpot(scenario, plan, runtime) -> float:
    """The simulator's TPOT over tokens, the planner's statistic."""
    return simulated_tpot(scenario, plan, SimConfig(requests=3000, seed=3, runtime=runtime))[0]


def test_a_decode_step_carries_each_sequence_s_tokens_message_in_the_plan_s_tpot_as_the_simulator_s():
    # the executor's decoder sends every decoding request its Tokens message after each step (token_stream_s CPU
    # × the slowdown): the simulator's step charges it per sequence, so does the plan's batch law given the runtime
    # — its TPOT within 3 % of the simulated (8.17 vs 8.20 ms) where without the charge it read 6.62 ms, -19 %
    # (a 0.5 ms message per sequence beside a ~6 ms step)
    scenario, plan = _cross_dc(0.0, 256, 1.0)
    rt = ExecutorRuntime.from_dict({**RUNTIME, "token_stream_s": 0.0005})
    problem = dataclasses.replace(resolve(scenario), runtime=rt)
    planned = evaluate_plan(problem, plan).metrics.tpot_s
    bare = evaluate_plan(resolve(scenario), plan).metrics.tpot_s
    simulated = _mean_tpot(scenario, plan, rt)
    assert stream_step_s(rt) == 0.0005 and stream_step_s(dataclasses.replace(rt, slowdown=2.0)) == 0.001
    assert stream_step_s(None) == 0.0
    assert planned == pytest.approx(simulated, rel=0.03)
    assert bare < 0.85 * simulated


def test_the_milp_s_decoder_design_meets_tpot_with_the_tokens_messages_in_its_step():
    # the MILP's decode design (flows.decode_design) takes the same step: the largest batch whose step, each
    # sequence's message included, meets the TPOT SLA — fewer sequences than the bare step allows
    scenario, _ = _cross_dc(0.0, 256, 1.0)
    rt = ExecutorRuntime.from_dict({**RUNTIME, "token_stream_s": 0.002})
    bare = resolve(scenario)
    bare = dataclasses.replace(bare, tpot_s=0.04)
    given = dataclasses.replace(bare, runtime=rt)
    im = instance(given, "H100-SXM", 1)
    (b0, s0), (b1, s1) = decode_design(bare, im), decode_design(given, im)
    ctx = 160 + 256 / 2
    assert s1 == pytest.approx(im.step_s(b1, ctx) + b1 * 0.002)
    assert s1 <= 0.04 < im.step_s(b1 + 1, ctx) + (b1 + 1) * 0.002
    assert 1 <= b1 < b0 and s0 == pytest.approx(im.step_s(b0, ctx))
