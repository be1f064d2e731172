"""The event loop moves through simulated time however far apart its events are (issue 43).

At t ≈ 3e8 s a float's step is ~6e-8 s: the last bytes of a WAN transfer (or the last part of a decode
step) can take less time than that, so the next event computed for them fell on t itself and the loop
spun there at 100 % CPU. A trace with one request that far out must replay in seconds like any other.
"""

from __future__ import annotations

import json

import pytest

from placer.sim import SimConfig, simulate

FAR_S = 3e8


def _trace(tmp_path, far: list[float]):
    rows = [{"timestamp": 200 * i, "input_length": 2000, "output_length": 50, "hit_rate": 0.5} for i in range(20)]
    rows += [{"timestamp": at * 1000, "input_length": 2000, "output_length": 50, "hit_rate": 0.5} for at in far]
    path = tmp_path / "far.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("far", [[FAR_S], [FAR_S, FAR_S + 0.01, FAR_S + 0.02]], ids=["one", "three-together"])
def test_a_request_far_in_the_future_is_served_like_the_others(pdd_problem, pdd_plan, tmp_path, far):
    result = simulate(pdd_problem, pdd_plan, SimConfig(requests=100, workload="trace", trace=_trace(tmp_path, far),
                                                       warmup_fraction=0.0))
    n = 20 + len(far)
    assert result["requests"] == n and result["measured_requests"] == n and result["rejected_requests"] == 0
    assert FAR_S <= result["simulated_s"] < FAR_S + 10  # it ran to the far request's end, no further
    # the far request met an idle cluster: its first token as soon as the near ones' (not a rounding-stuck wait)
    assert result["ttft_p99_s"] < pdd_problem.ttft_p90_s
    assert result["tpot_p90_s"] < pdd_problem.tpot_s
    assert result["sla_attainment"] == 1.0
