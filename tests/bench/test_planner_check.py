"""bench_serve's ladder (bench/planner_check.py): its runtime rungs on the deployed profile charge the host's pace once."""

from __future__ import annotations

import pytest

from placer.executor_runtime import ExecutorRuntime

RUNTIME = {"cores": 16, "slowdown": 1.1, "request_overhead_s": 0.004, "ttft_overhead_s": 0.002,
           "kv_export_bytes_per_s": 4e9, "kv_import_bytes_per_s": 6e9, "kv_export_fixed_s": 0.0005,
           "kv_import_fixed_s": 0.0006, "token_stream_s": 0.0002, "wan_frame_bytes": 65536, "wan_latency_s": 0.0016,
           "wan_latency_s_per_byte": 3.5e-10, "source": "a test's figures", "decode_pace": 1.16, "prefill_pace": 1.1,
           "interference": {"decode": {"decode": 1.68, "prefill": 1.35}}}


def test_the_runtime_rungs_charge_a_decode_step_the_deployed_table_s_seconds_not_its_pace_again(bench_path):
    # the deployed profile already runs each kind at its calibration serve's wall ÷ table (neighbours' mean cost in):
    # rung 2b kept the runtime's decode pace and its decode-beside-decode row on top — serve19's pdd decoders
    # charged 1.16 × 1.68 more, the rung's TPOT mean +32 % where the same simulator without the runtime read -6 %
    from planner_check import at_table_pace
    from served_forwards import charge

    rt = ExecutorRuntime.from_dict(RUNTIME)
    paced = at_table_pace(rt)
    alone, beside = charge(paced, "decode", ()), charge(paced, "decode", ("decode",))
    assert alone == pytest.approx(1.0)
    assert beside == pytest.approx(charge(paced, "prefill", ("decode",)))  # only the cores' sharing, no rows
    assert charge(rt, "decode", ("decode",)) > 1.9 * beside
    # its per-request costs and Tokens messages stay: what rung 1b prices
    assert (paced.token_stream_s, paced.request_overhead_s, paced.slowdown) == (0.0002, 0.004, 1.1)
