"""A trace whose timestamps are binned (the public Mooncake traces count arrivals in 3-second bins) is
replayed with each request at a uniform time within its bin, not as a burst at the bin's instant; a
trace at the arrivals' own resolution is replayed as it is (issue 42: the trace tail)."""

from __future__ import annotations

import json
import random

import pytest

from placer.sim import SimConfig
from placer.sim.engine import Simulation
from placer.sim.sources import trace_bin_s


def _trace(tmp_path, stamps_ms):
    lines = [json.dumps({"timestamp": t, "input_length": 2048, "output_length": 32, "hit_rate": 0.0}) for t in stamps_ms]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _arrivals(problem, plan, trace, **kw):
    times = []

    class Recording(Simulation):
        def arrive(self, item, rid):
            times.append(item[0])
            return super().arrive(item, rid)

    Recording(problem, plan, SimConfig(requests=10_000, workload="trace", trace=trace, **kw)).run()
    return times


def test_a_binned_trace_is_spread_over_its_bins(small_problem, small_plan, tmp_path):
    rng = random.Random(3)
    # 3 s bins (±1 ms, as the Mooncake traces round them), 2 to 8 requests in each
    bins = [b * 3000 + rng.choice([-1, 0, 1]) * (b > 0) for b in range(60)]
    stamps = [s for s in bins for _ in range(rng.randint(2, 8))]
    trace = _trace(tmp_path, stamps)
    assert abs(trace_bin_s(trace, 10_000) - 3.0) < 0.002
    times = _arrivals(small_problem, small_plan, trace)
    assert len(times) == len(stamps) and times == sorted(times)
    assert len({round(t, 9) for t in times}) == len(times)  # no two requests at the same instant
    first = stamps[0] / 1000
    for t, s in zip(sorted(times), sorted(stamps)):
        assert s / 1000 - first - 0.002 <= t < s / 1000 - first + 3.002  # within its own bin
    bins = [int((t + 0.002) // 3) for t in times]
    assert sum(t - 3 * b for t, b in zip(times, bins)) / len(times) > 1.0  # spread, not at the bins' starts
    exact = _arrivals(small_problem, small_plan, trace, spread_trace_bins=False)
    assert len(set(exact)) == len(set(stamps))


def test_a_trace_at_its_own_resolution_is_replayed_as_it_is(small_problem, small_plan, tmp_path):
    rng = random.Random(5)
    stamps, t = [], 0.0
    for _ in range(200):
        t += rng.expovariate(1 / 700)
        stamps.append(int(t))
    trace = _trace(tmp_path, stamps)
    assert trace_bin_s(trace, 10_000) == 0.0
    times = _arrivals(small_problem, small_plan, trace)
    assert times == pytest.approx([(s - stamps[0]) / 1000 for s in stamps], abs=1e-9)
