"""`--time-limit` holds while the MILP's data is prepared on a full mesh (issue 43).

A full mesh multiplies the flows (class × P queue × reachable destination × pipeline): 40
datacenters and 20 classes make ~950 000, and computing each flow's laws (TTFT, lateness, KV
hold) took ~11 s here in one loop that never looked at the clock, so the command ended long
after its limit (a 100-datacenter mesh with --time-limit 15 ran 83 s). The builder's loops
over flows now check the deadline every few thousand flows.
"""

from __future__ import annotations

import time

import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.placer.hardening.generated import large_scenario

#: Past the data's cheap first steps (candidate pools, the flows themselves: ~2 s here), inside
#: the flows' laws: without the checks there the command took ~16 s with this limit.
LIMIT_S = 4.0
#: What may run past the limit: reading the 780-line scenario (~0.5 s, the budget starts after
#: it), the longest stretch between two checks (~50 ms of flows, stretched by other work on this
#: 2-core machine), turning the timeout into exit 4 — or, since a plan found in time is returned
#: (issue 47), evaluating that plan's figures after the solve (~2 s on this 40-datacenter mesh:
#: its TTFT quantiles and tail notes). Far below the ~12 s the loop overran by.
MARGIN_S = 5.0


def _full_mesh(datacenters: int, classes: int) -> dict:
    """:func:`large_scenario` with a WAN line between every two datacenters instead of a ring."""
    scenario = large_scenario(datacenters=datacenters, classes=classes)
    scenario["links"] = [{"src": f"dc{i}", "dst": f"dc{j}", "gbit_per_s": 25, "rtt_ms": 5 + (i + j) % 40}
                         for i in range(datacenters) for j in range(i + 1, datacenters)]
    return scenario


def test_preparing_a_full_mesh_ends_at_the_time_limit(tmp_path):
    path = tmp_path / "mesh.yaml"
    path.write_text(yaml.safe_dump(_full_mesh(datacenters=40, classes=20)))
    start = time.monotonic()
    result = CliRunner().invoke(app, ["optimize", str(path), "--time-limit", str(LIMIT_S), "--no-verify"])
    wall_s = time.monotonic() - start
    # issue 47: a plan found in time comes back with its gap said first (exit 0); none found is exit 4
    lines = result.output.splitlines()
    first = next((line for line in lines if line and not line.startswith("solving")), "")
    assert (result.exit_code == 0 and first.startswith("best plan found within the time limit")) or (
        result.exit_code == 4 and f"time limit of {LIMIT_S:g} s" in result.output), result.output
    assert wall_s <= LIMIT_S + MARGIN_S, f"took {wall_s:.1f} s with --time-limit {LIMIT_S:g}"
