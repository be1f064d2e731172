"""run_bench against an OpenAI-compatible server that is not ours (tests/placer/loadgen/support.py), over real HTTP."""

from __future__ import annotations

import json
import statistics
import threading

import pytest
import yaml

from placer.errors import InputError
from placer.loadgen import BenchConfig, EndpointError, run_bench
from placer.specs import parse_scenario
from placer.workload.fit import fit_classes
from placer.workload.trace import read_trace
from tests.placer.loadgen.support import BLOCK, foreign_app, scenario_dict
from tests.support import live_server


def _scenario(**kw):
    return parse_scenario(scenario_dict(**kw))


def test_measures_every_request_from_the_stream_and_its_usage_chunk():
    app = foreign_app(step_s=0.003)
    with live_server(app) as url:
        result = run_bench(_scenario(), BenchConfig(url=url, requests=40, rate_rps=200.0, seed=1))
    d = result.data
    assert d["requests"] == 40 and d["errors"] == 0 and d["model"] == "other-llm"
    assert all(o.output_tokens == 8 for o in result.outcomes)  # usage.completion_tokens
    # 8 tokens 3 ms apart: each request's TPOT its stream's first-to-last token over 7 gaps, no shorter than the
    # server's 3-ms sleep; TTFT at least one step, e2e about 8 steps (no upper bound on a TPOT: a loaded CI host
    # stalls the in-process server, which the bench must report, not hide)
    tpots = sorted(o.tpot_s for o in result.outcomes)
    assert tpots[0] >= 0.0029 and all(o.ttft_s + 7 * o.tpot_s <= o.e2e_s for o in result.outcomes)
    assert d["tpot_p50_s"] == pytest.approx(statistics.median(tpots), abs=1e-6)
    assert 0.002 < d["ttft_p50_s"] <= d["ttft_p90_s"] <= d["ttft_p99_s"]
    assert d["e2e_p90_s"] >= d["ttft_p90_s"] + 6 * 0.002
    # good = TTFT within 2 s and TPOT within 50 ms, counted from each request's own stream; the share is
    # not asserted to be 1: a loaded 2-core CI host stalls the in-process server past 50 ms a token (CI
    # saw 0.825 once), which the bench must then report, not hide
    n_good = sum(o.ok and o.ttft_s <= 2.0 and (o.tpot_s is None or o.tpot_s <= 0.05) for o in result.outcomes)
    assert n_good > 0 and d["sla_attainment"] == pytest.approx(n_good / 40)
    assert d["goodput_rps"] == pytest.approx(d["achieved_rps"] * n_good / 40, rel=1e-4) and d["achieved_rps"] > 0
    body = app.state.seen["bodies"][-1]
    assert body["stream"] is True and body["max_tokens"] == 8 and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True} and body["model"] == "other-llm"
    assert "predicted" not in d  # no plan given


def test_the_endpoints_cache_sees_each_class_hit_rate_and_workload_fit_reads_the_log_back(tmp_path):
    log = tmp_path / "bench.jsonl"
    with live_server(foreign_app(step_s=0.0)) as url:
        result = run_bench(_scenario(hit=0.75), BenchConfig(url=url, requests=120, rate_rps=400.0, seed=2),
                           request_log=log)
    warm = [o for o in result.outcomes if o.request.request_class == "warm"]
    cold = [o for o in result.outcomes if o.request.request_class == "cold"]
    # the warm class's sessions were primed: each request hits its session's prefix (whole blocks of it)
    assert all(o.cached_tokens == (192 // BLOCK) * BLOCK for o in warm)
    assert all(o.cached_tokens == 0 for o in cold)
    assert result.data["prefix_hit_rate"] == pytest.approx(0.75 * len(warm) / 120, abs=0.01)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 120 and {ln["request_class"] for ln in lines} == {"warm", "cold"}
    assert all(ln["extra"]["hit_source"] == "server" and ln["output_length"] == 8 for ln in lines)
    classes = fit_classes(read_trace(log), min_share=0.02)
    hits = sorted(round(c.hit_rate, 2) for c in classes)
    assert hits[0] == 0.0 and hits[-1] == 0.75
    assert sum(c.share for c in classes if c.hit_rate > 0.5) == pytest.approx(len(warm) / 120)


def test_http_errors_and_dropped_streams_are_counted_never_dropped(tmp_path):
    log = tmp_path / "bench.jsonl"
    # an SLA no answered request misses even on a stalled CI host (there 16 of 20 answers once missed 50 ms a
    # token): the attainment below is then the answered share, errors counted against it
    generous = parse_scenario({**scenario_dict(), "sla": {"ttft_p90_s": 60.0, "tpot_s": 10.0}})
    with live_server(foreign_app(step_s=0.0, fail_every=5, drop_every=7)) as url:
        result = run_bench(generous, BenchConfig(url=url, requests=30, rate_rps=300.0, warmup=False),
                           request_log=log)
    d = result.data
    fails = [n for n in range(1, 31) if n % 5 == 0]
    drops = [n for n in range(1, 31) if n % 7 == 0 and n % 5 != 0]
    assert d["requests"] == 30 and d["errors"] == len(fails) + len(drops)
    assert d["error_kinds"] == {"HTTP 500": len(fails), "dropped stream":
                                len(drops)}
    assert d["sla_attainment"] == pytest.approx((30 - d["errors"]) / 30)
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(1 for ln in logged if ln["error"]) == d["errors"]


def test_a_redirect_to_another_host_is_an_error_not_followed():
    with live_server(foreign_app(redirect=True)) as url:
        result = run_bench(_scenario(), BenchConfig(url=url, requests=3, rate_rps=100.0, warmup=False))
    assert result.data["errors"] == 3
    assert all("not followed" in o.error and "example.invalid" in o.error for o in result.outcomes)


def test_a_stop_ends_sending_and_keeps_what_was_measured():
    stop = threading.Event()

    def progress(done, total):
        if done >= 5:
            stop.set()

    with live_server(foreign_app(step_s=0.001)) as url:
        result = run_bench(_scenario(), BenchConfig(url=url, requests=2000, rate_rps=50.0), progress=progress,
                           stop=stop)
    d = result.data
    assert d["interrupted"] is True and 5 <= d["requests"] < 50
    assert d["ttft_p50_s"] is not None and d["errors"] == 0


def test_an_endpoint_that_does_not_answer_is_an_endpoint_error():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EndpointError, match=f"127.0.0.1:{port}"):
        run_bench(_scenario(), BenchConfig(url=f"http://127.0.0.1:{port}", requests=1))


@pytest.mark.parametrize("kw, field", [({"url": "ftp://host/x"}, "URL"), ({"url": "localhost:8000"}, "URL"),
                                        ({"requests": 0}, "--requests"), ({"requests": 10**7}, "--requests"),
                                        ({"duration_s": -1.0}, "--duration"), ({"rate_rps": 0.0}, "--rate"),
                                        ({"max_concurrency": 0}, "--max-concurrency"), ({"unit": "char"}, "--unit")])
def test_bad_settings_name_their_option(kw, field):
    with pytest.raises(InputError, match=field):
        BenchConfig(**{"url": "http://127.0.0.1:1", **kw})


def test_a_duration_bounds_the_run():
    with live_server(foreign_app(step_s=0.0)) as url:
        result = run_bench(_scenario(), BenchConfig(url=url, duration_s=0.5, rate_rps=40.0, seed=3))
    # Poisson at 40/s for 0.5 s: about 20 requests, and never the 100,000 cap
    assert 5 <= result.data["requests"] <= 45 and result.data["planned_requests"] == result.data["requests"]


def test_endpoint_forms_all_reach_the_completions_path():
    for url in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/completions"):
        assert BenchConfig(url=url).endpoints() == ("http://h:1/v1/models", "http://h:1/v1/completions")


def test_yaml_scenario_round_trip_is_what_the_cli_reads(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario_dict()))
    from placer.specs import load_scenario

    assert load_scenario(path).name == "bench-small"


def test_a_rerun_does_not_find_the_last_runs_prompts_in_the_cache():
    with live_server(foreign_app(step_s=0.0)) as url:
        runs = [run_bench(_scenario(hit=0.75), BenchConfig(url=url, requests=40, rate_rps=400.0, seed=5))
                for _ in range(2)]
    for result in runs:  # the same seed, the same classes and times; a cold request still misses
        cold = [o for o in result.outcomes if o.request.request_class == "cold"]
        assert cold and all(o.cached_tokens == 0 for o in cold)
    assert runs[0].data["prefix_hit_rate"] == runs[1].data["prefix_hit_rate"]


def test_a_trace_replays_its_times_lengths_and_shared_blocks(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 20 * i, "input_length": 1100, "output_length": 3,
                                         "hash_ids": [1, 2, 10 + i]}) + "\n" for i in range(10)))
    with live_server(foreign_app(step_s=0.0)) as url:
        result = run_bench(_scenario(), BenchConfig(url=url, trace=str(trace)))
    outs = result.outcomes
    assert result.data["requests"] == 10 and result.data["workload"] == "trace" and result.data["errors"] == 0
    assert [o.prompt_tokens for o in outs] == [1100] * 10 and all(o.output_tokens == 3 for o in outs)
    assert [o.cached_tokens for o in outs] == [0] + [1024] * 9  # blocks 1 and 2: 512 units each
    assert outs[-1].sent_unix_s - outs[0].sent_unix_s == pytest.approx(0.18, abs=0.05)


def test_the_concurrency_cap_holds_and_says_how_many_arrivals_waited():
    app = foreign_app(step_s=0.01)
    with live_server(app) as url:
        result = run_bench(_scenario(), BenchConfig(url=url, requests=12, rate_rps=500.0, max_concurrency=2,
                                                    warmup=False))
    assert app.state.seen["most_in_flight"] <= 2 and result.data["errors"] == 0
    assert result.data["capped"] >= 5 and result.data["send_lag_max_s"] > 0.1


def test_a_request_the_cap_held_back_counts_its_wait_in_ttft():
    # two slots, 12 arrivals at once, each request ~80 ms: the last ones wait ~0.4 s for a slot, as users would
    with live_server(foreign_app(step_s=0.01)) as url:
        result = run_bench(_scenario(), BenchConfig(url=url, requests=12, rate_rps=10_000.0, max_concurrency=2,
                                                    warmup=False))
    held = [o for o in result.outcomes if o.send_lag_s > 0.2]
    assert held and all(o.ttft_s >= o.send_lag_s for o in held)
    assert result.data["ttft_p99_s"] >= 0.2 > result.data["tpot_p90_s"]
