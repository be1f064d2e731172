"""Issue 43, part 4: names from a plan never become paths. `placer export` writes only under
`--out` (or, without it, a folder named after the scenario's slug in the working directory);
datacenters whose names slug alike get distinct folders, routers and node selectors; a plan too
large to write is refused before anything is generated."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli.app import app
from placer.errors import InputError
from placer.export import MAX_EXPORT_INSTANCE_NODES, write
from placer.export.names import distinct_slugs, slug

runner = CliRunner()


def _plan(dcs: list[str], scenario: str = "s", count: int = 1) -> dict:
    """A P and a D pool in each datacenter of ``dcs``, with P-D traffic inside each."""
    pools, routes = [], []
    for dc in dcs:
        pools += [{"role": "P", "datacenter": dc, "chip": "H100-SXM", "tp": 1, "count": count},
                  {"role": "D", "datacenter": dc, "chip": "H100-SXM", "tp": 1, "count": count}]
        routes.append({"request_class": "c", "pipeline": "P-D", "src": dc, "dst": dc, "rps": 1.0})
    return {"scenario": scenario, "pools": pools, "routes": routes}


def _export(tmp_path, plan: dict, fmt: str, *extra: str):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    result = runner.invoke(app, ["export", str(path), "--format", fmt, "--model", "m", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


HOSTILE = ["../../evil", "/tmp/placer-export-abs", "..", ".", "a/../../b"]


@pytest.mark.parametrize("fmt", ["sglang", "vllm", "dynamo", "k8s"])
def test_export_writes_only_under_out_whatever_the_datacenters_are_named(tmp_path, fmt):
    out = tmp_path / "a" / "b" / "out"
    result = _export(tmp_path, _plan(HOSTILE), fmt, "--out", str(out))
    assert result.exit_code == 0, result.output
    written = [p for p in _files(tmp_path) if p.name != "plan.json"]
    assert written and all(p.resolve().is_relative_to(out.resolve()) for p in written), written
    folders = {p.parent for p in written if p.parent != out}
    assert len(folders) == len(HOSTILE)  # one folder per datacenter, none shared


def test_the_default_folder_is_the_scenarios_slug_in_the_working_directory(tmp_path, monkeypatch):
    work = tmp_path / "w1" / "w2"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    result = _export(tmp_path, _plan(["dc-a"], scenario="../../escaped"), "k8s")
    assert result.exit_code == 0, result.output
    written = [p for p in _files(tmp_path) if p.name != "plan.json"]
    assert written and all(p.resolve().is_relative_to(work.resolve()) for p in written), written
    assert (work / "escaped-k8s" / "README.md").is_file()


def test_names_that_slug_alike_get_distinct_folders_routers_and_selectors(tmp_path):
    names = ["DC A", "dc-a", "dc a", "日本", "中国"]
    result = _export(tmp_path, _plan(names), "k8s", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    folders = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert len(folders) == len(names) and "dc-a" in folders and "" not in folders
    docs = [d for p in (tmp_path / "out").rglob("*.yaml") for d in yaml.safe_load_all(p.read_text())]
    routers = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].startswith("router-")]
    assert len({d["metadata"]["name"] for d in routers}) == len(names)
    selectors = {d["spec"]["template"]["spec"]["nodeSelector"]["placer.io/datacenter"] for d in routers}
    assert len(selectors) == len(names)
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "datacenter `DC A` → `dc-a-" in readme and "datacenter `日本`" in readme


def test_slugs_are_stable_labels_and_plain_names_keep_theirs():
    assert slug("dc-a") == "dc-a" and slug("US East") == "us-east"  # plain names: exports unchanged
    assert slug("日本") == slug("日本") != slug("中国") and slug("日本")
    long = "x" * 80
    assert len(slug(long)) <= 63 and slug(long) != slug(long + "y")  # no truncation collision
    labels = distinct_slugs(["DC A", "dc-a"], "datacenter")
    assert labels["dc-a"] == "dc-a" and labels["DC A"].startswith("dc-a-") and labels == distinct_slugs(
        ["DC A", "dc-a"], "datacenter")
    for name in ["..", ".", "/", "../x", "a/b", "\\", "日本"]:
        s = slug(name)
        assert s and "/" not in s and s not in (".", "..") and len(s) <= 63


def test_write_refuses_a_path_outside_out_before_writing_anything(tmp_path):
    out = tmp_path / "out"
    for rel in ("../x.sh", "/tmp/placer-export-x.sh", "a/../../x.sh"):
        with pytest.raises(InputError, match="outside --out"):
            write({"ok.sh": "", rel: ""}, out)
    assert not out.exists()


def test_a_plan_larger_than_the_bound_is_refused_before_generating(tmp_path):
    count = MAX_EXPORT_INSTANCE_NODES // 2 + 1  # P and D pools: just over the bound
    result = _export(tmp_path, _plan(["dc-a"], count=count), "sglang", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert f"{MAX_EXPORT_INSTANCE_NODES:,}" in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()
    ok = _export(tmp_path, _plan(["dc-a"], count=2), "sglang", "--out", str(tmp_path / "ok"))
    assert ok.exit_code == 0, ok.output
