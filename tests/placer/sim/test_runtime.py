"""The simulator on the executor's runtime (placer.sim.runtime): the executor's rules, not the planner's."""

from __future__ import annotations

import json

import pytest

from placer.errors import InputError
from placer.sim import SimConfig, simulate
from placer.sim.runtime import ExecutorRuntime, Host
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict

FIGURES = {"cores": 2, "slowdown": 1.0, "request_overhead_s": 0.002, "kv_export_bytes_per_s": 2e9,
           "kv_import_bytes_per_s": 4e9, "token_stream_s": 0.0005}


def _runtime(**changes) -> ExecutorRuntime:
    return ExecutorRuntime.from_dict({**FIGURES, **changes})


def test_bad_runtime_figures_name_the_field(tmp_path):
    with pytest.raises(InputError, match="runtime.cores"):
        _runtime(cores=0)
    with pytest.raises(InputError, match="runtime.token_stream_s"):
        _runtime(token_stream_s=-1)
    with pytest.raises(InputError, match="runtime.wan_hol_bytes: must be >= 0, got -1"):
        _runtime(wan_hol_bytes=-1)
    with pytest.raises(InputError, match="runtime.wan_latency_s: must be a number"):
        _runtime(wan_latency_s="2 ms")
    with pytest.raises(InputError, match="missing field 'slowdown'"):
        ExecutorRuntime.from_dict({k: v for k, v in FIGURES.items() if k != "slowdown"})
    with pytest.raises(InputError, match="unknown field 'cpus'"):
        ExecutorRuntime.from_dict({**FIGURES, "cpus": 4})
    bad = tmp_path / "rt.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        ExecutorRuntime.from_json(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(FIGURES))
    assert ExecutorRuntime.from_json(good).cores == 2


def test_instances_share_the_cores_the_gil_and_what_other_work_leaves():
    def factors(**changes):
        host = Host(_runtime(**changes))
        out = []
        for _ in range(3):
            host.busy += 1
            out.append(host.factor())
        return out

    assert factors() == [1.0, 1.0, 1.5]  # no speedup measured: two forwards on two cores run at full speed
    # measured: two engine threads get 1.6x one's throughput, three 1.5x (the GIL); other work halves a thread
    assert factors(speedup=[1.0, 1.6, 1.5], slowdown=2.0) == pytest.approx([2.0, 2.0 * 2 / 1.6, 2.0 * 3 / 1.5])
    assert factors(speedup=[1.0, 1.6])[2] == pytest.approx(3 / 1.6)  # past the table: its last value
    # a probe that read more than the cores can give (noise: 2.07 for three threads on two cores) is capped
    assert factors(speedup=[1.0, 1.2, 2.07])[2] == pytest.approx(3 / 2.0)
    with pytest.raises(InputError, match="runtime.speedup"):
        _runtime(speedup=[1.0, -2])


def test_each_phase_runs_at_its_measured_pace_and_overheads_at_the_slowdown():
    host = Host(_runtime(slowdown=1.2, prefill_pace=1.5, decode_pace=0.8, speedup=[1.0, 1.6]))
    host.busy = 2
    k = 2 / 1.6  # two forwards share the cores as measured
    assert host.factor("prefill") == pytest.approx(1.5 * k)
    assert host.factor("decode") == pytest.approx(0.8 * k)
    assert host.factor() == pytest.approx(1.2 * k)  # CPU-second overheads (export, orders, token messages)
    unmeasured = Host(_runtime(slowdown=1.2))
    assert unmeasured.factor("decode") == unmeasured.factor("prefill") == 1.2  # no pace: the slowdown stands in
    with pytest.raises(InputError, match="runtime.decode_pace"):
        _runtime(decode_pace=-1)


INTERFERENCE = {"decode": {"prefill": 1.25, "decode": 1.1}, "prefill": {"prefill": 1.0, "decode": 1.05}}


def test_a_decode_step_beside_a_prefill_pays_the_measured_interference():
    """Two forwards on two cores share the memory bus: the pair's measured figure replaces speedup's."""
    host = Host(_runtime(speedup=[1.0, 1.9, 1.9], interference=INTERFERENCE))
    host.change(0.0, +1, "decode")
    assert host.factor("decode") == 1.0  # alone
    host.change(0.0, +1, "prefill")
    assert host.factor("decode") == pytest.approx(1.25)  # beside a prefill, as measured
    assert host.factor("prefill") == pytest.approx(1.05)
    assert host.factor() == pytest.approx(2 / 1.9)  # CPU-second overheads: speedup as before
    host.change(0.0, +1, "decode")  # three threads on two cores: each runs beside one of the others
    assert host.factor("decode") == pytest.approx((3 / 1.9) / (2 / 1.9) * (1.25 + 1.1) / 2)
    assert host.factor("prefill") == pytest.approx(1.5 * 1.05)
    assert host.factor("prefill", own="decode") == pytest.approx(1.5 * (1.0 + 1.05) / 2)  # a decoder's extend
    host.change(0.0, -1, "prefill")
    host.change(0.0, -1, "decode")
    assert host.factor("decode") == 1.0
    unmeasured = Host(_runtime(speedup=[1.0, 1.9]))
    unmeasured.change(0.0, +1, "decode")
    unmeasured.change(0.0, +1, "prefill")
    assert unmeasured.factor("decode") == pytest.approx(2 / 1.9)  # not measured: speedup alone, as before


def test_a_decode_step_pays_the_figure_measured_at_its_batch():
    """Measured at one and four sequences (a small batch is more Python, so more GIL, per second): a
    step pays its own batch's figure, linear between them, the nearest one's outside."""
    rt = _runtime(interference={"decode@1": {"decode": 1.3, "prefill": 1.2}, "decode@4": {"decode": 1.0}})
    assert rt.beside("decode", "decode", 1) == pytest.approx(1.3)
    assert rt.beside("decode", "decode", 2) == pytest.approx(1.2)
    assert rt.beside("decode", "decode", 4) == pytest.approx(1.0)
    assert rt.beside("decode", "decode", 9) == pytest.approx(1.0)
    assert rt.beside("decode", "prefill", 3) == pytest.approx(1.2)  # measured at one batch only
    assert rt.beside("prefill", "decode") == 1.0  # not measured
    host = Host(rt)
    host.change(0.0, +1, "decode")
    host.change(0.0, +1, "decode")  # two decoders: each beside the other
    assert host.factor("decode", batch=1) == pytest.approx(1.3)
    assert host.factor("decode", batch=3) == pytest.approx(1.1)


def test_bad_interference_figures_name_the_field():
    with pytest.raises(InputError, match="runtime.interference: kind must be one of prefill, decode or "
                                         "decode@<batch>, got 'extend'"):
        _runtime(interference={"extend": {"prefill": 1.1}})
    with pytest.raises(InputError, match="or decode@<batch>, got 'decode@0'"):
        _runtime(interference={"decode@0": {"prefill": 1.1}})
    with pytest.raises(InputError, match="runtime.interference.decode.prefill: must be a number > 0, got 0"):
        _runtime(interference={"decode": {"prefill": 0}})
    with pytest.raises(InputError, match="runtime.interference.decode: must be one of prefill, decode, line, "
                                         "got 'router'"):
        _runtime(interference={"decode": {"router": 1.1}})
    with pytest.raises(InputError, match="runtime.line_bytes_per_s: the interference beside 'line' needs"):
        _runtime(interference={"decode": {"line": 1.2}})
    with pytest.raises(InputError, match="runtime.interference: expected an object"):
        _runtime(interference=[1.2])


def test_interference_lengthens_tpot_while_prompts_are_prefilled(tmp_path):
    """Requests arriving while the decoder steps: its steps beside P's prefills take longer."""
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(0.05 * k, 2048, 64, 0.0) for k in range(12)])
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=12, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**rt)))
    base = run(speedup=[1.0, 2.0])
    loud = run(speedup=[1.0, 2.0], interference={"decode": {"prefill": 1.5, "decode": 1.0}})
    assert loud["tpot_p90_s"] > 1.1 * base["tpot_p90_s"]
    assert loud["ttft_p50_s"] == pytest.approx(base["ttft_p50_s"], rel=0.05)  # prefill beside decode: 1 (unlisted)


def test_a_slower_decode_pace_lengthens_tpot_not_the_prefill(tmp_path):
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(k * 20.0, 2048, 64, 0.0) for k in range(3)])  # lone requests
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=3, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**rt)))
    base, slow = run(), run(decode_pace=2.0)
    assert slow["tpot_p50_s"] > 1.8 * base["tpot_p50_s"]
    assert slow["ttft_p50_s"] == pytest.approx(base["ttft_p50_s"], rel=0.01)


def test_a_busy_wan_line_loads_the_io_thread_beside_the_forwards():
    host = Host(_runtime(wan_cpu_s_per_byte=8e-9, speedup=[1.0, 1.5]))  # FIGURES lack it: 0, not measured
    host.busy = 1

    class Line:
        rate = 25e6  # bytes/s: 0.2 of a core at 8 ns/byte

    line = Line()
    assert host.factor() == 1.0
    host.line(0.0, line, True)
    assert host.factor() == pytest.approx(1.2 / (1.0 + 0.2 * 0.5))  # speedup between the table's 1 and 2
    host.line(1.0, line, False)
    assert host.factor() == 1.0
    assert Host(_runtime()).runtime.wan_cpu_s_per_byte == 0.0


def test_a_measured_busy_line_costs_the_forwards_its_figure_in_proportion_to_the_bytes():
    """Measured beside a busy line, a forward pays that figure — not the I/O thread's share of a core
    — scaled by the busy lines' rate over the measured line's; overheads keep the share of a core."""
    host = Host(_runtime(wan_cpu_s_per_byte=8e-9, speedup=[1.0, 1.5], line_bytes_per_s=25e6,
                         interference={"decode": {"prefill": 1.1, "line": 1.2}, "prefill": {"line": 1.3}}))
    host.change(0.0, +1, "decode")

    class Line:
        def __init__(self, rate):
            self.rate = rate

    full, half = Line(25e6), Line(12.5e6)
    assert host.factor("decode") == 1.0
    host.line(0.0, full, True)
    assert host.factor("decode") == pytest.approx(1.2)
    assert host.factor("prefill", own="decode") == pytest.approx(1.3)
    assert host.factor() == pytest.approx(1.2 / (1.0 + 0.2 * 0.5))  # an overhead: the I/O thread's share
    host.line(0.0, half, True)  # 1.5x the measured line's bytes
    assert host.factor("decode") == pytest.approx(1.0 + 0.2 * 1.5)
    host.line(1.0, full, False)
    host.change(1.0, +1, "prefill")  # and beside a prefill: both figures
    assert host.factor("decode") == pytest.approx((1.0 + 0.2 * 0.5) * 1.1)  # the pair: its measured figure
    host.line(2.0, half, False)
    assert host.factor("decode") == pytest.approx(1.1)


def test_paces_read_off_served_forwards_already_hold_the_lines_cost():
    """Calibrated by a served trace (``line_in_pace``), a busy line adds nothing to a table forward — not
    the I/O thread's share of a core, not a ``line`` row — while the overheads still see the I/O share."""
    host = Host(_runtime(wan_cpu_s_per_byte=8e-9, speedup=[1.0, 1.5], decode_pace=1.25, line_in_pace=True,
                         interference={"decode": {"prefill": 1.1, "line": 1.2}}, line_bytes_per_s=25e6))
    host.change(0.0, +1, "decode")

    class Line:
        rate = 25e6

    host.line(0.0, Line(), True)
    assert host.factor("decode") == pytest.approx(1.25)
    assert host.factor() == pytest.approx(1.2 / (1.0 + 0.2 * 0.5))
    with pytest.raises(InputError, match="runtime.line_in_pace: must be true or false, got 'yes'"):
        _runtime(line_in_pace="yes")


def _trace(tmp_path, rows) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({"timestamp": t * 1000, "input_length": n, "output_length": o,
                                        "hit_rate": h}) + "\n" for t, n, o, h in rows))
    return str(path)


def _same_dc_problem_and_plan():
    from placer.optimize import as_problem
    from placer.plan import Plan

    data = small_pdd_dict()
    problem = as_problem(parse_scenario(data))
    cls = [c.name for c in problem.classes]
    plan = Plan.model_validate({
        "scenario": "small-pdd",
        "pools": [{"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1},
                  {"role": "MD", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1}],
        "routes": [{"request_class": c, "pipeline": "P-MD", "src": "dc-a", "dst": "dc-a", "rps": 1.0}
                   for c in cls]})
    return problem, plan


def _cross_dc_problem_and_plan():
    """P in dc-a, its decoder in dc-b across a 10 Gbit/s line of 30 ms and no jitter."""
    from placer.optimize import as_problem
    from placer.plan import Plan

    data = small_pdd_dict(links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10, "rtt_ms": 30, "jitter_ms": 0}])
    problem = as_problem(parse_scenario(data))
    plan = Plan.model_validate({
        "scenario": "small-pdd",
        "pools": [{"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1},
                  {"role": "MD", "datacenter": "dc-b", "chip": "H20", "tp": 1, "count": 1}],
        "routes": [{"request_class": c.name, "pipeline": "P-MD", "src": "dc-a", "dst": "dc-b", "rps": 1.0}
                   for c in problem.classes]})
    return problem, plan


def test_the_executor_prefills_one_request_per_forward(tmp_path):
    """Short prompts arriving together are packed into one forward by the planner's P, one each by the executor's."""
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(0.0, 512, 8, 0.0)] * 6)
    cfg = dict(requests=6, workload="trace", trace=trace, warmup_fraction=0.0)
    packed = simulate(problem, plan, SimConfig(**cfg))
    executor = simulate(problem, plan, SimConfig(**cfg, runtime=_runtime()))
    forwards = lambda r: next(p["forwards"] for p in r["pools"] if p["role"] == "P")
    assert forwards(packed) < 6
    assert forwards(executor) == 6
    assert executor["ttft_p90_s"] > packed["ttft_p90_s"]


def test_fewer_cores_and_a_busier_machine_slow_the_same_trace(tmp_path):
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(0.01 * k, 4096, 64, 0.0) for k in range(8)])
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=8, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**rt)))
    roomy, tight, shared = run(cores=8), run(cores=1), run(cores=1, slowdown=2.0)
    assert roomy["ttft_p50_s"] < tight["ttft_p50_s"] < shared["ttft_p50_s"]
    assert roomy["tpot_p50_s"] < tight["tpot_p50_s"] < shared["tpot_p50_s"]


def test_serialising_the_kv_shows_in_ttft(tmp_path):
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(k * 10.0, 8192, 8, 0.0) for k in range(4)])  # lone requests
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=4, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**rt)))
    fast = run(kv_export_bytes_per_s=1e13, kv_import_bytes_per_s=1e13)
    slow = run(kv_export_bytes_per_s=1e9, kv_import_bytes_per_s=2e9)
    kv_s = 8192 * problem.kv_bytes_per_token * (1 / 1e9 + 1 / 2e9)  # export on P + import on MD
    assert slow["ttft_p50_s"] - fast["ttft_p50_s"] == pytest.approx(kv_s, rel=0.1)


def test_an_export_and_an_import_pay_their_fixed_part_whatever_the_bytes(tmp_path):
    """A turn's small KV costs more than its bytes (served: 0.4-0.7 ms to export and 0.6-1.4 ms to import 1.5 MB
    where the rate gives 0.25): the fixed parts delay each first token by their sum, for a short prompt as for a
    long one, and the decoder's import stalls its batch by its own."""
    problem, plan = _same_dc_problem_and_plan()
    for tokens in (64, 8192):
        trace = _trace(tmp_path, [(k * 10.0, tokens, 8, 0.0) for k in range(4)])  # lone requests
        run = lambda **rt: simulate(problem, plan, SimConfig(requests=4, workload="trace", trace=trace,
                                                             warmup_fraction=0.0, runtime=_runtime(**rt)))
        base, fixed = run(), run(kv_export_fixed_s=0.0004, kv_import_fixed_s=0.001)
        assert fixed["ttft_p50_s"] - base["ttft_p50_s"] == pytest.approx(0.0014, rel=0.02)
    rt = _runtime(kv_export_fixed_s=0.0004, kv_import_fixed_s=0.001)
    assert rt.export_s(0) == 0.0004 and rt.import_s(4e9) == pytest.approx(1.001)
    with pytest.raises(InputError, match="runtime.kv_import_fixed_s: must be >= 0, got -0.001"):
        _runtime(kv_import_fixed_s=-0.001)


def test_only_the_overhead_on_the_first_tokens_path_delays_it(tmp_path):
    """A request's CPU overhead is mostly off its first token's path: where that part was measured
    (ttft_overhead_s), it alone delays the first token; where not, the whole CPU overhead stands in."""
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(k * 10.0, 1024, 8, 0.0) for k in range(4)])  # lone requests
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=4, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**rt)))
    whole = run(request_overhead_s=0.008)
    path = run(request_overhead_s=0.008, ttft_overhead_s=0.002)
    assert whole["ttft_p50_s"] - path["ttft_p50_s"] == pytest.approx(0.006, rel=0.01)
    assert whole["tpot_p50_s"] == pytest.approx(path["tpot_p50_s"])


class _Series:
    def peak(self, t, value):
        pass


class _StepModel:
    """A decode instance model whose step takes 0.1 s at any batch."""

    batch_cap = 64
    kv_capacity_tokens = 1 << 20

    def step_s(self, batch, context):
        return 0.1


def _decoder():
    from placer.sim.decode import DecodeInstance

    class _Engine:
        heap: list = []
        seq = iter(range(1 << 30))

    return DecodeInstance(_Engine(), _StepModel(), "MD", None, _Series(), _runtime(cores=8), Host(_runtime(cores=8)))


def _req(rid):
    from placer.sim.engine import Req

    req = Req()
    req.rid, req.n_in, req.n_out, req.t_first = rid, 100, 50, None
    return req


def test_a_kv_that_lands_mid_step_waits_for_the_step_to_end():
    """The executor's decoder handles messages between two steps (RoleWorker.run_once)."""
    md = _decoder()
    assert md.step_boundary(0.0) == 0.0  # idle: its worker takes the message at once
    md.join(_req(1), 0.0, 40)
    step = md.step  # 0.1 s and the streamed token's cost
    assert md.step_boundary(2.5 * step) == pytest.approx(3 * step)  # mid-step: when it ends
    assert md.step_boundary(3 * step) == pytest.approx(3 * step)  # between two steps: at once
    md.stall(3 * step, 0.05)  # an import: the worker is between steps, so the next message follows it
    assert md.step_boundary(3 * step + 0.01) == pytest.approx(3 * step + 0.01)


def test_under_load_a_decoders_step_delays_the_next_first_token(tmp_path):
    """A KV landing on a busy decoder waits for the step in progress; on an idle one it does not."""
    problem, plan = _same_dc_problem_and_plan()
    short = (3.0, 256, 4, 0.0)
    run = lambda rows: simulate(problem, plan, SimConfig(requests=len(rows), workload="trace",
                                                         trace=_trace(tmp_path, rows), warmup_fraction=0.0,
                                                         runtime=_runtime(cores=8)))
    alone = run([short])["ttft_p50_s"]
    # a long decode still running when the short request's KV lands; its TTFT (> 1 s) is the larger
    behind = run([(0.0, 8192, 4000, 0.0), short])["ttft_p50_s"]
    assert alone < behind < alone + 0.1


def test_a_busy_decoder_pulls_the_kv_between_two_steps_so_it_lands_in_the_next_one(tmp_path):
    """The executor's decoder sends KVPull when it handles its order, between two steps
    (roles/md.py: on_order → _pull); P answers at once, so the KV lands early in the NEXT step and
    waits for that one too: a request arriving mid-step waits more than a whole step, never less
    (bench_serve's same-datacenter run: the KV reached D in the first tenth of a step for half the
    requests, and the time from P's prefill to the import was 1.1 steps at the median)."""
    problem, plan = _same_dc_problem_and_plan()
    stream_s = 0.2  # a step of ~0.2 s per request decoding: the streamed token's cost dominates
    short = (3.0, 256, 4, 0.0)
    run = lambda rows: simulate(problem, plan, SimConfig(requests=len(rows), workload="trace",
                                                         trace=_trace(tmp_path, rows), warmup_fraction=0.0,
                                                         runtime=_runtime(cores=8, token_stream_s=stream_s)))
    alone = run([short])["ttft_p50_s"]
    behind = run([(0.0, 2048, 400, 0.0), short])["ttft_p50_s"]  # the short one arrives while MD steps
    assert stream_s < behind - alone < 2 * stream_s + 0.05


def test_a_prefill_slows_down_when_the_decoders_start_stepping_beside_it(tmp_path):
    """P's forward is re-timed when the busy count changes, not priced once when it starts."""
    problem, plan = _same_dc_problem_and_plan()
    # a short prompt with a long decode, then a long prompt whose prefill starts before that decode does
    rows = [(0.0, 256, 4000, 0.0), (0.0001, 8192, 4, 0.0)]
    run = lambda cores: simulate(problem, plan, SimConfig(requests=2, workload="trace", trace=_trace(tmp_path, rows),
                                                          warmup_fraction=0.0, runtime=_runtime(cores=cores)))
    roomy, shared = run(8)["ttft_p99_s"], run(1)["ttft_p99_s"]  # the long prompt's TTFT
    assert shared > 1.6 * roomy  # on one core, P's forward shares it with MD's steps almost throughout


class _LineLoop:
    """An event heap on the executor's runtime, recording when each KV landed."""

    def __init__(self, runtime):
        self.heap, self.seq, self.runtime, self.landed = [], iter(range(10**9)), runtime, {}
        self.host = Host(runtime)  # no forwards running unless a test says so

    def kv_landed(self, req, t):
        self.landed[req.rid] = t

    def send(self, link, req, t):
        """``req``'s KV starts crossing ``link`` at ``t`` (in the loop's time order)."""
        from heapq import heappush

        heappush(self.heap, (t, next(self.seq), lambda now, r: link.add(r, r.xfer, now), req))

    def run(self):
        from heapq import heappop

        while self.heap:
            t, _, fn, arg = heappop(self.heap)
            fn(t, arg)


def _line(frame_bytes: float, jitter_s: float = 0.005, **figures):
    import random

    from placer.sim.links import WanLink
    from placer.sim.metrics import TimeSeries

    loop = _LineLoop(_runtime(wan_frame_bytes=frame_bytes, **figures))
    link = WanLink(loop, "dc-a", "dc-b", bytes_per_s=25e6, rtt_s=0.03, jitter_s=jitter_s,
                   series=TimeSeries(10, 10, "sum"), rng=random.Random(3))
    return loop, link


def _wan_req(rid, n_bytes, pipe="P-RLD-MD", p="p0", md=None):
    from types import SimpleNamespace

    from placer.sim.router import PIPE_CODE

    req = _req(rid)
    req.flow, req.xfer, req.p, req.md = None, n_bytes, p, md
    req.path = SimpleNamespace(pipe=PIPE_CODE[pipe])
    return req


def test_a_kv_of_many_frames_lands_when_its_connections_latest_frame_does():
    """The emulated line draws each frame's delay on its own and releases frames in order: a 1.5 MB KV
    (24 frames of 64 KiB) lands about 2 ms later than one draw of the one way says; with no jitter, no later."""
    import statistics

    n_bytes = 1.5e6
    late = {}
    for frame, jitter in ((0, 0.005), (65536, 0.005), (65536, 0.0)):
        loop, link = _line(frame, jitter)
        for k in range(400):  # lone transfers, one a second
            loop.send(link, _wan_req(k, n_bytes), float(k))
        loop.run()
        late[frame, jitter] = statistics.median(loop.landed[k] - k - n_bytes / 25e6 for k in range(400))
    assert late[0, 0.005] == pytest.approx(0.015, abs=0.0008)  # one draw: RTT/2 at the median
    assert 0.0165 < late[65536, 0.005] < 0.019
    assert late[65536, 0.0] == pytest.approx(0.015)


def test_kvs_of_one_connection_never_land_out_of_order():
    """Frames of one connection are released in order: a small KV that finishes crossing while a big one
    from the same P to the same decoder is still crossing lands first, and the big one no earlier; KVs
    of other connections are not held back."""
    loop, link = _line(65536)
    for k in range(300):  # a big KV to md0, and 70 ms later a small one to md0 (odd k) or md1 (even k)
        t = 0.2 * k
        loop.send(link, _wan_req(2 * k, 2e6, md="md0"), t)
        loop.send(link, _wan_req(2 * k + 1, 70e3, md="md0" if k % 2 else "md1"), t + 0.07)
    loop.run()
    same = [(loop.landed[2 * k + 1], loop.landed[2 * k]) for k in range(1, 300, 2)]
    other = [(loop.landed[2 * k + 1], loop.landed[2 * k]) for k in range(0, 300, 2)]
    assert all(small <= big for small, big in same)
    assert all(loop.landed[2 * k] >= max(loop.landed[2 * k - 1], loop.landed[2 * k - 2]) for k in range(2, 300, 2))
    assert min(big - small for small, big in other) < min(big - small for small, big in same)


def test_the_first_token_from_a_busy_decoder_waits_behind_its_token_messages():
    """On P-MD the first token crosses back to the router in order behind the Tokens messages the decoder
    sent after its last steps: a decoder stepping three sequences every 10 ms makes it later."""
    import statistics
    from types import SimpleNamespace

    late = {}
    for batch in (0, 3):
        loop, link = _line(0)
        md = SimpleNamespace(B=batch, step=0.01)
        for k in range(400):
            loop.send(link, _wan_req(k, 1e5, pipe="P-MD", md=md), float(k))
        loop.run()
        late[batch] = statistics.median(loop.landed[k] - k - 1e5 / 25e6 for k in range(400))
    assert late[0] == pytest.approx(0.030, abs=0.0015)  # the KV's one way and t0's
    assert late[3] - late[0] > 0.002


def test_a_kv_joining_a_busy_connection_waits_behind_the_bytes_buffered_before_the_line():
    """A turn's 1.5 MB KV sent while a 30 MB one crosses from the same P to the same decoder waits behind the
    bytes past the relay's read-ahead (wan_hol_bytes: 0.4 MB = 16 ms at 25 MB/s), then shares the line; on a
    connection of its own it shares at once; beside a big one whose rest fits the read-ahead it waits for
    nothing. The line loses no capacity: the big one lands when all the bytes have crossed."""
    figures = dict(wan_hol_bytes=4e5, wan_read_ahead_s=0.25)
    took = {}
    for big, md in ((30e6, "md0"), (30e6, "md1"), (8e6, "md0")):
        loop, link = _line(0, 0.0, **figures)
        loop.send(link, _wan_req(0, big, md="md0"), 0.0)
        loop.send(link, _wan_req(1, 1.5e6, md=md), 0.1)
        loop.run()
        took[big, md] = loop.landed[1] - 0.1 - 0.015
        assert loop.landed[0] == pytest.approx((big + 1.5e6) / 25e6 + 0.015)
    fair = 2 * 1.5e6 / 25e6
    assert took[30e6, "md1"] == pytest.approx(fair)
    assert took[30e6, "md0"] == pytest.approx(fair + 4e5 / 25e6)
    assert took[8e6, "md0"] == pytest.approx(fair)  # 5.5 MB left: inside the 6.25 MB read-ahead


def test_a_message_across_the_line_pays_the_socket_paths_latency():
    """Beyond the line's shaping a message crossing the executor's sockets pays wan_latency_s and its bytes'
    share; on P-MD so does the first token's trip back to the router."""
    for pipe, messages in (("P-RLD-MD", 1), ("P-MD", 2)):
        landed = []
        for figures in ({}, {"wan_latency_s": 0.002, "wan_latency_s_per_byte": 1e-9}):
            loop, link = _line(0, 0.0, **figures)
            loop.send(link, _wan_req(0, 1.5e6, pipe=pipe), 0.0)
            loop.run()
            landed.append(loop.landed[0])
        assert landed[1] - landed[0] == pytest.approx(0.002 * messages + 1.5e6 * 1e-9)


def test_a_message_across_the_line_pays_more_while_engine_threads_run_forwards():
    """The I/O thread that carries a message waits for a core and the GIL while engines run forwards: with k of
    them busy the message pays the k-th measured figure more (past the table its last), the KV and the first
    token back alike."""
    figures = {"wan_latency_s": 0.001, "wan_latency_beside_s": [0.0002, 0.0012]}
    landed = {}
    for busy in (0, 1, 2, 3):
        loop, link = _line(0, 0.0, **figures)
        loop.host.busy = busy
        loop.send(link, _wan_req(0, 1.5e6, pipe="P-MD"), 0.0)
        loop.run()
        landed[busy] = loop.landed[0]
        assert link.message_s(queued=False) == pytest.approx(0.015 + 0.001 + (0, 0.0002, 0.0012, 0.0012)[busy])
    assert landed[1] - landed[0] == pytest.approx(2 * 0.0002)  # the KV and t0
    assert landed[3] - landed[0] == pytest.approx(2 * 0.0012)
    with pytest.raises(InputError, match="runtime.wan_latency_beside_s: must be a list of numbers >= 0"):
        _runtime(wan_latency_beside_s=[0.001, -0.001])


def test_a_small_message_waits_its_turn_in_the_lines_round_robin():
    """The emulator's relay sends one 64 KiB frame at a time, round-robin over the transfers waiting: an order
    joining two KVs in flight waits for the frame on the line (half of one, expected) and one of each KV —
    2.5 frames, 6.6 ms at 25 MB/s; on an idle line, or with the wait not asked for (the way back), nothing."""
    loop, link = _line(65536, 0.0)
    assert link.message_s() == pytest.approx(0.015)
    link.n = 2
    assert link.message_s() == pytest.approx(0.015 + 2.5 * 65536 / 25e6)
    assert link.message_s(queued=False) == pytest.approx(0.015)


def test_the_order_to_a_remote_decoder_crosses_beside_ps_prefill(tmp_path):
    """The router's orders leave together: the decoder's crosses while P's prefill of the same request runs, so
    it pays the latency beside one busy engine thread, as does the decoder's pull back; the KV and the first token
    cross with nothing running (lone requests, the decoder idle between them)."""
    problem, plan = _cross_dc_problem_and_plan()
    trace = _trace(tmp_path, [(k * 10.0, 1024, 8, 0.0) for k in range(4)])  # lone requests
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=4, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**rt)))
    base = run(wan_latency_s=0.001)["ttft_p50_s"]
    beside = run(wan_latency_s=0.001, wan_latency_beside_s=[0.004, 0.009])["ttft_p50_s"]
    assert beside - base == pytest.approx(2 * 0.004)


def test_a_host_pace_timeline_is_read_checked_and_scales_every_charge():
    rt = _runtime(host_pace=[[0.0, 1.0], [10.0, 1.5]])
    assert rt.host_pace == ((0.0, 1.0), (10.0, 1.5))
    for bad in ([[0.0, 0.0]], [[5.0, 1.0], [5.0, 1.2]], [[0.0, "fast"]], [[0.0]], [1.0]):
        with pytest.raises(InputError, match=r"runtime.host_pace"):
            _runtime(host_pace=bad)
    host = Host(_runtime(decode_pace=1.2))
    before = host.factor("decode"), host.factor()
    host.set_drift(0.0, 1.5)
    assert (host.factor("decode"), host.factor()) == pytest.approx((1.5 * before[0], 1.5 * before[1]))


def test_the_host_slowing_mid_run_slows_only_what_runs_after(tmp_path):
    """Lone requests 20 s apart; the host runs at half speed from 30 s: the last two decode at half speed, the
    first two as before, and a timeline longer than the run does not stretch its end."""
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(k * 20.0, 2048, 64, 0.0) for k in range(4)])
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=4, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**rt)))
    steady = run()
    moved = run(host_pace=[[0.0, 1.0], [30.0, 2.0], [500.0, 1.0]])
    assert moved["tpot_p90_s"] > 1.8 * steady["tpot_p50_s"]
    assert moved["tpot_p50_s"] < 1.9 * steady["tpot_p50_s"]  # two of four at the steady pace
    assert moved["simulated_s"] == pytest.approx(steady["simulated_s"], abs=5.0)


def test_the_prefills_own_host_pace_moves_the_prefills_and_leaves_the_decode_steps(tmp_path):
    """A compute-bound prefill moves apart from a memory-bound decode step on a shared host: a prefill timeline
    at 2x doubles the lone requests' prefill (their TTFT), not their steps; the decode timeline still moves
    the steps, and a bad prefill timeline names its field."""
    with pytest.raises(InputError, match=r"runtime.host_pace_prefill\[0\]"):
        _runtime(host_pace_prefill=[[0.0, -1.0]])
    host = Host(_runtime())
    host.set_drift(0.0, 1.5)
    host.set_drift(0.0, 0.5, prefill=True)
    assert host.factor("prefill") == pytest.approx(0.5) and host.factor("decode") == pytest.approx(1.5)
    problem, plan = _same_dc_problem_and_plan()
    trace = _trace(tmp_path, [(k * 20.0, 2048, 64, 0.0) for k in range(3)])
    fast_kv = dict(kv_export_bytes_per_s=1e13, kv_import_bytes_per_s=1e13)  # TTFT: the prefill, and overheads
    run = lambda **rt: simulate(problem, plan, SimConfig(requests=3, workload="trace", trace=trace,
                                                         warmup_fraction=0.0, runtime=_runtime(**fast_kv, **rt)))
    steady = run()
    slow_prefill = run(host_pace_prefill=[[0.0, 2.0]])
    assert slow_prefill["ttft_p50_s"] > 1.8 * steady["ttft_p50_s"]
    assert slow_prefill["tpot_p50_s"] == pytest.approx(steady["tpot_p50_s"], rel=0.01)
    both = run(host_pace=[[0.0, 2.0]], host_pace_prefill=[[0.0, 1.0]])
    assert both["tpot_p50_s"] > 1.8 * steady["tpot_p50_s"]
    assert both["ttft_p50_s"] < 1.2 * steady["ttft_p50_s"]  # the prefill at its own pace: only overheads move
