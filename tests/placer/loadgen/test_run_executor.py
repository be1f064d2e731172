"""run_bench against our executor's server (a P, an RLD and an MD of the tiny model on CPU), over real HTTP."""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("torch")

from executor.cluster import LocalCluster  # noqa: E402
from executor.placement import InstanceSpec  # noqa: E402
from executor.routing import RoutingPolicy  # noqa: E402
from executor.server import create_app  # noqa: E402
from placer.loadgen import BenchConfig, run_bench  # noqa: E402
from placer.pdd import FilterRule  # noqa: E402
from placer.specs import parse_scenario  # noqa: E402
from tests.executor.conftest import engine_config, model_config, one_torch_thread  # noqa: E402, F401
from tests.executor.support import serving  # noqa: E402
from tests.placer.loadgen.support import scenario_dict  # noqa: E402
from tests.support import live_server  # noqa: E402

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("rld0", "RLD", "dc-a", "A"),
         InstanceSpec("md0", "MD", "dc-b", "B")]


@pytest.fixture
def executor_url(model_config, engine_config):  # noqa: F811
    policy = RoutingPolicy(direct_min_hit_rate=0.5, filter_rule=FilterRule(min_input_tokens=10**6))
    cluster = LocalCluster(SPECS, model_config, engine_config, serving(routing=policy), transport="fake", threads=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with live_server(create_app(cluster.router)) as url:
            yield url
    cluster.close()


def test_bench_measures_the_executor_and_logs_what_its_router_saw(executor_url, tmp_path):
    log = tmp_path / "bench.jsonl"
    scenario = parse_scenario(scenario_dict(hit=0.75, input_tokens=64, output_tokens=6))
    result = run_bench(scenario, BenchConfig(url=executor_url, requests=16, rate_rps=20.0, seed=4, sessions=2),
                       request_log=log)
    d = result.data
    assert d["requests"] == 16 and d["errors"] == 0, d["error_kinds"]
    assert d["model"] == "placer-tiny"
    # ignore_eos: every request decodes its full length, counted by the server's usage
    assert all(o.output_tokens == 6 and o.prompt_tokens == 65 for o in result.outcomes)  # the byte tokenizer's BOS
    assert 0 < d["ttft_p50_s"] <= d["e2e_p90_s"] and d["tpot_p50_s"] > 0
    warm = [o for o in result.outcomes if o.request.request_class == "warm"]
    # the executor reports its prefix hit: the warm sessions' 48-unit prefix (+ BOS) in 4-token blocks
    assert warm and all(o.cached_tokens >= 44 for o in warm)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {ln["pipeline"] for ln in lines} <= {"P-MD", "P-RLD-MD"}
    assert all(ln["extra"]["hit_source"] == "server" for ln in lines)
