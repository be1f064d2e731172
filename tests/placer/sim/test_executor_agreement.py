"""The simulator predicts our own executor: bench_serve --quick end to end, simulated vs measured.

Slow (about 10 minutes on 2 cores): it measures the CPU profile and the runtime figures, serves
the quick trace three ways through the real executor (a calibration serve, then the trace twice;
the pair served again where the host itself changed speed between them), and replays the same
trace (same prompts, same arrival times) in the simulator on the executor's runtime. The bound is
looser than the full run's 15 % (issue 19): the quick trace has 27 requests, and its TTFT
P90 is held to the wider of the bound and the run's own bootstrap interval for it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BOUND = 0.30


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the profile alone is ~4 min on 2 cores (three passes over the serve grid)
def test_bench_serve_quick_is_predicted_within_30_per_cent(tmp_path):
    out = tmp_path / "serve.json"
    # two serves per setup, "measured" their median: the executor's own spread between serves of one trace
    # reached 37 % (docs/benchmarks.md, 2026-12-04 run t)
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_serve.py"), "--quick", "--reps", "2",
                        "--rounds", "1", "--repeats", "2", "--json", str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    comparison = json.loads(out.read_text())["comparison"]
    # a P90 of 27 requests is the third-slowest: held to BOUND or to how well the run itself knows it
    # (the bench's bootstrap 90 % interval, ±20-80 % on the quick trace), whichever is wider
    bound = lambda rows, metric: max(BOUND, rows["ttft_p90_spread"]) if metric == "TTFT P90" else BOUND
    misses = {f"{setup} {metric}": round(rows[metric]["error"], 3)
              for setup, rows in comparison["rows"].items()
              for metric in ("TTFT P50", "TTFT P90", "TPOT P50")
              if not abs(rows[metric]["error"]) <= bound(rows, metric)}
    assert not misses, f"simulated vs measured beyond {BOUND:.0%}: {misses}\n{r.stdout[-3000:]}"
    # the ordering by TTFT P90, for the setups the measurement tells apart (P90s more than BOUND apart)
    p90 = {setup: (rows["TTFT P90"]["measured"], rows["TTFT P90"]["simulated"])
           for setup, rows in comparison["rows"].items()}
    flipped = [(a, b) for a in p90 for b in p90
               if p90[a][0] * (1 + BOUND) < p90[b][0] and not p90[a][1] < p90[b][1]]
    assert not flipped, f"measured faster but simulated not: {flipped}\n{r.stdout[-3000:]}"
