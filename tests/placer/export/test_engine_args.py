"""Every command and manifest `placer export` writes for the bundled examples, run through the
engines' own checkers (SGLang's ServerArgs, sglang-router's parser, `vllm serve`'s parser and
EngineArgs, kubernetes-validate): an argument an engine does not know fails the test."""

from __future__ import annotations

import json

import pytest
import yaml

from placer.export import ExportSettings, export_plan
from placer.plan import parse_plan
from tests.placer.export.conftest import EXAMPLES, SHAPE_CASES, example_export

FORMATS = ("sglang", "vllm", "dynamo", "k8s")
# what kubelet substitutes into a LeaderWorkerSet pod's args
LWS_ENV = {"$(LWS_LEADER_ADDRESS)": "leader.example", "$(LWS_WORKER_INDEX)": "1"}


def _docs(files: dict[str, str]):
    for path, text in files.items():
        if path.endswith(".yaml"):
            for n, doc in enumerate(yaml.safe_load_all(text)):
                if doc:
                    yield f"{path}#{n}", doc


def _containers(doc: dict):
    spec = doc.get("spec", {})
    if doc["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        templates = [lwt["leaderTemplate"], lwt["workerTemplate"]]
    elif doc["kind"] == "Deployment":
        templates = [spec["template"]]
    else:
        templates = []
    for t in templates:
        yield from t["spec"]["containers"]


#: the other branches of the flags: a bf16 checkpoint served with online fp8 weights, bf16 KV, no DRC
OTHER_DTYPES = ExportSettings("meta-llama/Llama-3.1-8B", "llama-3.1-8b", kv_dtype="bf16", weight_dtype="fp8",
                              native_weight_dtype="bf16", drc=False)
OTHER_PLAN = {"scenario": "micro", "pools": [{"role": "P", "datacenter": "a", "chip": "H100-SXM", "tp": 2, "count": 1},
                                             {"role": "D", "datacenter": "a", "chip": "L40S", "tp": 1, "count": 2}],
              "routes": [{"request_class": "c", "pipeline": "P-D", "src": "a", "dst": "a", "rps": 1.0}]}
CASES = (*EXAMPLES, "bf16-checkpoint", *SHAPE_CASES)


def _export(example: str, fmt: str) -> dict[str, str]:
    if example == "bf16-checkpoint":
        return export_plan(parse_plan(OTHER_PLAN), fmt, OTHER_DTYPES)
    return example_export(example, fmt)


def items_for(example: str, fmt: str) -> list[dict]:
    """(id, parser, args | manifest) of everything in one export that an engine or k8s checks."""
    files = _export(example, fmt)
    items = []
    if fmt in ("sglang", "vllm"):
        for n, c in enumerate(json.loads(files["commands.json"])):
            if c["parser"]:
                items.append({"id": f"{example}/{fmt}/{c['host']}/{n}", "parser": c["parser"], "args": c["args"]})
    elif fmt == "dynamo":
        for where, doc in _docs(files):
            for name, svc in doc["spec"]["services"].items():
                if svc["componentType"] == "worker":
                    items.append({"id": f"{example}/{fmt}/{where}/{name}", "parser": "sglang",
                                  "args": svc["extraPodSpec"]["mainContainer"]["args"]})
    else:
        for where, doc in _docs(files):
            items.append({"id": f"{example}/{fmt}/{where}/{doc['kind']}", "parser": "k8s", "manifest": doc})
            for n, c in enumerate(_containers(doc)):
                parser = "sglang-router" if c["command"][-1] == "sglang_router.launch_router" else "sglang"
                args = [LWS_ENV.get(a, a).replace("$(LWS_LEADER_ADDRESS)", LWS_ENV["$(LWS_LEADER_ADDRESS)"])
                        for a in c["args"]]
                items.append({"id": f"{example}/{fmt}/{where}/c{n}", "parser": parser, "args": args})
    return items


#: checks the checkers must fail: a flag each engine does not know, a manifest the schema refuses
NEGATIVE = [
    {"id": "neg/sglang", "parser": "sglang", "args": ["--model-path", "m", "--relay-decode"]},
    {"id": "neg/sglang-router", "parser": "sglang-router", "args": ["--pd-disaggregation", "--relay", "x"]},
    {"id": "neg/vllm", "parser": "vllm", "args": ["m", "--relay-decode"]},
    {"id": "neg/vllm-role", "parser": "vllm", "args": ["m", "--kv-transfer-config", '{"kv_connector": "NixlConnector", '
                                                       '"kv_role": "kv_relay"}']},
    {"id": "neg/k8s", "parser": "k8s", "manifest": {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
        "spec": {"replicas": "two", "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i",
                                                                                           "gpus": 8}]}}}}},
]


@pytest.fixture(scope="module")
def verdicts(engine_checker):
    """One run of the checkers over both examples in every format, and the negative controls."""
    items = [item for example in CASES for fmt in FORMATS for item in items_for(example, fmt)]
    return engine_checker(items + NEGATIVE)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("example", CASES)
def test_every_generated_argument_is_known_to_the_engine(verdicts, example, fmt):
    items = items_for(example, fmt)
    parsers = {i["parser"] for i in items}
    assert parsers >= ({"sglang", "sglang-router", "k8s"} if fmt == "k8s" else {"sglang"} if fmt == "dynamo"
                       else {"sglang", "sglang-router"} if fmt == "sglang" else {"vllm"})
    failed = {i["id"]: verdicts[i["id"]]["error"] for i in items if not verdicts[i["id"]]["ok"]}
    assert not failed
    if example == "bf16-checkpoint" and fmt in ("sglang", "vllm"):
        args = [a for i in items for a in i["args"]]
        assert "--quantization" in args and "bfloat16" in args


def test_the_checkers_refuse_what_the_engines_refuse(verdicts):
    for item in NEGATIVE:
        assert not verdicts[item["id"]]["ok"], item["id"]
    assert "unrecognized arguments: --relay-decode" in verdicts["neg/sglang"]["error"]
    assert "--relay-decode" in verdicts["neg/vllm"]["error"]
