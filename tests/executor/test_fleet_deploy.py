"""A fleet plan deployed: one router per model, requests routed by their `model`, models apart on devices.

In process: two tiny Hugging Face checkpoints of different families (built locally, as the
checkpoint tests build them) serve the two models of a fleet plan over one shared WAN line; each
model's requests must come back as its own checkpoint's transformers greedy output, from its own
instances. The command line: `placer deploy --dry-run` of the fleet example groups the deployment
by model; bad per-model options and live changes of a fleet are refused naming what is wrong.
"""

from __future__ import annotations

import json
import warnings

import pytest
from typer.testing import CliRunner

from executor.devices import Runtime, place_on_devices
from executor.elastic import FleetChangeUnsupported
from executor.engine import EngineConfig
from executor.engine.hf import load_checkpoint
from executor.fleet import fleet_members, local_fleet
from executor.placement import placement, plan_models
from placer.errors import InfeasiblePlanError, InputError
from placer.plan import Plan
from placer.specs import load_scenario
from tests.executor.engine.hf_support import CORPUS, hf_greedy, tiny_checkpoints

TOKEN = "fleet-test-token"
EXAMPLE = "examples/fleet-two-models.yaml"
ENGINE = EngineConfig(backend="torch", block_size=4, num_blocks=256)


def _pools(model: str) -> list[dict]:
    return [{"model": model, "role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
            {"model": model, "role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1}]


FLEET = Plan.model_validate({
    "scenario": "tiny-fleet", "pools": _pools("chat") + _pools("code"),
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 1.0}],
    "models": {"chat": {"goodput_rps": 1.0}, "code": {"goodput_rps": 0.5}}})


def test_each_model_gets_its_own_named_instances_router_and_the_shared_line():
    members = fleet_members(FLEET)
    assert plan_models(FLEET) == ("chat", "code")
    assert [m.name for m in members] == ["chat", "code"]
    assert [s.name for s in members[0].specs] == ["chat.p-dc-a-A-tp1-0", "chat.md-dc-b-B-tp1-0"]
    assert {s.model for s in members[1].specs} == {"code"}
    assert members[1].plan.metrics.goodput_rps == 0.5  # each model's own metrics, from plan.models
    assert members[0].config.links == members[1].config.links  # one line, shared
    assert all(m.config.router_datacenter == "dc-a" for m in members)


def test_the_models_share_the_chips_their_pools_together_must_fit():
    scenario = load_scenario(EXAMPLE)
    both = Plan.model_validate({"scenario": scenario.name, "pools": [
        {"model": m, "role": r, "datacenter": dc, "chip": chip, "tp": 8, "count": 6}
        for m in ("chat", "code") for r, dc, chip in (("P", "dc-a", "H800-SXM"), ("MD", "dc-b", "H20"))]})
    # each model alone fits dc-a's 80 H800s (48), both need 96
    with pytest.raises(InfeasiblePlanError, match=r"inventory\[dc-a,H800-SXM\].*96"):
        fleet_members(both, scenario)
    lonely = both.model_copy(update={"pools": [p.model_copy(update={"model": "poetry"}) for p in both.pools]})
    with pytest.raises(InputError, match="'poetry'.*chat, code"):
        fleet_members(lonely, scenario)


def test_models_never_share_a_gpu_even_when_instances_must_share_them():
    specs = placement(FLEET)
    cuda = Runtime(backend="triton", device="cuda", dtype="bfloat16")
    placed = place_on_devices(specs, cuda, gpus=2)  # 4 instances of tp 1 on 2 GPUs: they share
    gpus_of = {m: {g for s in placed if s.model == m for g in s.gpu_ids} for m in ("chat", "code")}
    assert gpus_of["chat"] and gpus_of["code"] and not gpus_of["chat"] & gpus_of["code"]
    assert all(s.num_gpus == 0.5 for s in placed)
    with pytest.raises(ValueError, match="2 models cannot each have GPUs of their own on 1 GPUs"):
        place_on_devices(specs, cuda, gpus=1)
    uneven = {s.name: (s.gpu_ids, s.num_gpus) for s in place_on_devices(specs, cuda, gpus=3)}
    assert uneven["chat.p-dc-a-A-tp1-0"] == ((0,), 1.0) and uneven["chat.md-dc-b-B-tp1-0"] == ((1,), 1.0)
    assert uneven["code.p-dc-a-A-tp1-0"] == ((2,), 0.5) == uneven["code.md-dc-b-B-tp1-0"]  # code shares its one
    roomy = place_on_devices(specs, cuda, gpus=4)  # enough for every tp: Ray gives each its own
    assert all(s.num_gpus == 1.0 and not s.gpu_ids for s in roomy)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """chat serves the tiny Llama-3 checkpoint, code the tiny Qwen2 one: different weights and tokenizers."""
    dirs = tiny_checkpoints(tmp_path_factory)
    return {"chat": dirs["llama3"], "code": dirs["qwen2"]}


def test_a_fleet_in_process_serves_each_model_from_its_own_instances(checkpoints):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from executor.server import ServedModel, create_app

    loaded = {name: load_checkpoint(d) for name, d in checkpoints.items()}
    prompt = CORPUS[3]
    expected = {name: ck.tokenizer.decode(hf_greedy(checkpoints[name], ck.tokenizer.encode(prompt), 12,
                                                     stop_at_eos=False)) for name, ck in loaded.items()}
    assert expected["chat"] != expected["code"]  # the two models really differ
    with local_fleet(FLEET, fleet_members(FLEET), loaded, ENGINE) as fleet:
        models = {name: ServedModel(router, loaded[name].tokenizer) for name, router in fleet.routers.items()}
        client = TestClient(create_app(models=models, deployment=fleet, token=TOKEN))
        assert all(not dep.link_emulators for dep in fleet.deployments.values())  # no line of their own
        crossed = [0]  # bytes over the one dc-a -> dc-b line after each request: each model's KV adds to it
        for name in ("code", "chat"):
            r = client.post("/v1/completions", json={"model": name, "prompt": prompt, "max_tokens": 12,
                                                     "ignore_eos": True})
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["model"] == name and out["choices"][0]["text"] == expected[name]
            served_by = set(out["placer"]["instances"].values())
            assert served_by and all(i.startswith(f"{name}.") for i in served_by)
            crossed.append(fleet.stats()["links"]["dc-a<->dc-b"]["dc-a->dc-b"]["bytes"])
        assert crossed[0] < crossed[1] < crossed[2]
        unknown = client.post("/v1/completions", json={"model": "poetry", "prompt": "hi", "max_tokens": 2})
        assert unknown.status_code == 404
        assert "'poetry'" in unknown.json()["detail"] and "chat, code" in unknown.json()["detail"]
        nameless = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
        assert nameless.status_code == 400 and "chat, code" in nameless.json()["detail"]
        assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["chat", "code"]
        text = client.get("/metrics", params={"format": "prometheus"}).text
        assert 'placer_requests_completed_total{model="chat"} 1' in text
        assert 'placer_requests_completed_total{model="code"} 1' in text
        assert 'placer_instance_up{model="code",instance="code.md-dc-b-B-tp1-0"}' in text
        assert client.get("/metrics").json()["models"]["chat"]["completed"] == 1
        health = client.get("/health").json()
        assert health["models"]["code"]["instances"] == {"P": 1, "MD": 1}
        auth = {"Authorization": f"Bearer {TOKEN}"}
        listed = {i["name"]: i["model"] for i in client.get("/instances", headers=auth).json()}
        assert listed["chat.md-dc-b-B-tp1-0"] == "chat" and len(listed) == 4
        orphan = client.post("/instances", json={"name": "x", "role": "MD", "datacenter": "dc-b"}, headers=auth)
        assert orphan.status_code == 422 and "chat, code" in orphan.json()["detail"]
        only_chat = FLEET.model_copy(update={"pools": [p for p in FLEET.pools if p.model == "chat"]})
        change = client.post("/plan", json=only_chat.model_dump(mode="json"), headers=auth)
        assert change.status_code == 501
        assert "changing the models served (running: chat, code; the new plan: chat)" in change.json()["detail"]
        with pytest.raises(FleetChangeUnsupported, match="changing the models served"):
            fleet.apply_plan(only_chat)


def _cli():
    from placer.cli.app import app

    return app


@pytest.fixture(scope="module")
def example_plan(tmp_path_factory):
    """The fleet example planned by `placer optimize` (the real solver)."""
    path = tmp_path_factory.mktemp("fleet") / "plan.json"
    result = CliRunner().invoke(_cli(), ["optimize", EXAMPLE, "--out", str(path)])
    assert result.exit_code == 0, result.output
    return path


def test_dry_run_of_the_fleet_example_prints_each_models_deployment(example_plan):
    result = CliRunner().invoke(_cli(), ["deploy", str(example_plan), "--scenario", EXAMPLE, "--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.output
    plan = json.loads(example_plan.read_text())
    assert out.startswith("fleet plan 'fleet-two-models': 2 models")
    chat, code = out.index("model chat:"), out.index("model code:")
    shared = out.index("shared by the models:")
    assert chat < code < shared
    n_chat = sum(p["count"] for p in plan["pools"] if p["model"] == "chat")
    assert f"model chat: {n_chat} instances, its own router" in out
    assert "chat." not in out[code:] and "code." not in out[chat:code]  # each model's instances in its group
    relaying = {r["model"] for r in plan["routes"] if r["pipeline"] in ("P-RLD-MD", "P-RLD") and r["rps"] > 0}
    assert out.count("router in dc-a") == 2 and out.count("handoff adaptive") == len(relaying)
    assert "link dc-a<->dc-b: 25 Gbit/s, RTT 30 ms, jitter 5 ms" in out[shared:]
    assert "(the planner's prediction: plan.models.code)" in out


@pytest.mark.parametrize(("args", "named"), [
    (["--model-dir", "poetry=/nowhere"], "unknown model 'poetry'; the plan serves chat, code"),
    (["--model-dir", "/nowhere"], "give --model-dir NAME=PATH once per model"),
    (["--model-file", "code=/nowhere.pt"], "--model-file '/nowhere.pt' does not exist"),
    (["--scenario", "examples/pdd-two-dc.yaml"], "scenario 'pdd-two-dc' plans one model"),
])
def test_bad_fleet_options_exit_2_naming_them(example_plan, args, named):
    result = CliRunner().invoke(_cli(), ["deploy", str(example_plan), "--dry-run", *args])
    assert result.exit_code == 2 and named in result.output, result.output
    assert "Traceback" not in result.output


def test_a_fleet_changes_live_model_by_model_through_post_plan(model_config, engine_config):
    """A new plan of the same models: chat gets a second MD (it joins chat's router only), code
    keeps its instances; both models serve throughout. A row naming no served model is a 422."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from executor.server import ServedModel, create_app

    pools = [p.model_copy(update={"count": 2}) if (p.model, p.role) == ("chat", "MD") else p for p in FLEET.pools]
    bigger = FLEET.model_copy(update={"pools": pools})
    auth = {"Authorization": f"Bearer {TOKEN}"}
    models = {"chat": model_config, "code": model_config}
    with local_fleet(FLEET, fleet_members(FLEET), models, engine_config) as fleet:
        app = create_app(models={n: ServedModel(r) for n, r in fleet.routers.items()}, deployment=fleet, token=TOKEN)
        client = TestClient(app)
        started = client.post("/plan", json=bigger.model_dump(mode="json"), params={"grace_s": 1}, headers=auth)
        assert started.status_code == 202, started.text
        status = app.state.plan_apply.wait(60)
        assert status["state"] == "succeeded", status
        assert status["report"]["joined"] == ["chat.md-dc-b-B-tp1-1"] and not status["report"]["drained"]
        assert "chat.md-dc-b-B-tp1-1" in fleet.routers["chat"].instances
        assert "chat.md-dc-b-B-tp1-1" not in fleet.routers["code"].instances and len(fleet.routers["code"].instances) == 2
        assert fleet.plan == bigger
        for name in ("chat", "code"):
            r = client.post("/v1/completions", json={"model": name, "prompt": "after", "max_tokens": 3})
            assert r.status_code == 200, r.text
        unnamed = bigger.model_copy(update={"pools": [p.model_copy(update={"model": None}) if p.role == "MD" and
                                                      p.model == "code" else p for p in bigger.pools]})
        bad = client.post("/plan", json=unnamed.model_dump(mode="json"), headers=auth)
        assert bad.status_code == 422 and "pools[" in bad.text and "names the model of every row" in bad.text


def test_a_single_model_server_names_its_model_and_refuses_a_fleet_plan(model_config, engine_config):
    """One model served: `model` may be left out or name it; another name is a 404 naming the served one;
    a fleet plan posted to it is refused (501) before anything changes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from executor.cluster import LocalCluster
    from executor.server import create_app

    chat = fleet_members(FLEET)[0]  # chat's part, deployed alone as a single-model deployment
    single = chat.specs
    with LocalCluster(single, model_config, engine_config, chat.config) as cluster:
        client = TestClient(create_app(cluster.router, deployment=cluster, token=TOKEN))
        body = {"prompt": "hi", "max_tokens": 3, "ignore_eos": True}
        first = client.post("/v1/completions", json=body)
        assert first.status_code == 200 and first.json()["model"] == "placer-tiny", first.text
        assert client.post("/v1/completions", json={**body, "model": "placer-tiny"}).status_code == 200
        other = client.post("/v1/completions", json={**body, "model": "gpt-4"})
        assert other.status_code == 404 and "'gpt-4'" in other.text and "placer-tiny" in other.text
        change = client.post("/plan", json=FLEET.model_dump(mode="json"),
                             headers={"Authorization": f"Bearer {TOKEN}"})
        assert change.status_code == 501
        assert "turning a single-model deployment into a fleet (chat, code) is not supported yet" in change.text
        assert sorted(cluster.instances) == sorted(s.name for s in single)  # nothing changed


def test_one_request_log_for_the_fleet_tags_each_record_and_closes_with_the_last_router():
    from executor.fleet_deploy import SharedLog
    from placer.records import RequestRecord

    class Log:
        def __init__(self):
            self.records, self.closed = [], 0

        def add(self, record):
            self.records.append(record)

        def close(self):
            self.closed += 1

    log = Log()
    shared = SharedLog(log, ["chat", "code"])
    chat, code = shared.view("chat"), shared.view("code")
    record = RequestRecord("r1", 0.0, input_tokens=4, output_tokens=2, prefix_hit_tokens=0, pipeline="P-MD",
                           extra={"k": 1})
    chat.add(record)
    chat.close()
    assert log.closed == 0  # code's router still writes
    code.add(record)
    code.close()
    assert log.closed == 1
    assert [(r.extra["model"], r.extra["k"]) for r in log.records] == [("chat", 1), ("code", 1)]
