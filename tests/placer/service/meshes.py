"""Full-mesh scenarios: the issue-43 reproductions of work that grows with the input (not a test module)."""

from __future__ import annotations

from bench.limit_scenarios import large_scenario


def full_mesh(datacenters: int, classes: int = 4, seed: int = 0) -> dict:
    """:func:`large_scenario`'s datacenters and classes with a WAN line between every pair: the
    200-datacenter one is 19,900 links, 1.1 MB of JSON (under the API's 4 MiB body limit)."""
    spec = large_scenario(datacenters, classes, seed)
    spec["name"] = f"mesh-{datacenters}dc-{classes}k"
    spec["links"] = [{"src": f"dc{i}", "dst": f"dc{j}", "gbit_per_s": 25, "rtt_ms": 5 + (i + j) % 40}
                     for i in range(datacenters) for j in range(i + 1, datacenters)]
    return spec
