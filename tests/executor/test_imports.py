"""The executor's import rules: policy code imports neither torch nor ray; the `deploy`
command's module neither torch nor ray nor the HTTP stack; the executor reads only the
placer base layer (never the planner library's faces or its service)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import placer.perfmodel

POLICY = ["executor.routing", "executor.handoff", "executor.stream", "executor.placement", "executor.request_log",
          "executor.transport.messages", "executor.transport.shaping", "executor.transport.fake",
          "executor.admission", "executor.health", "executor.lease", "executor.elastic", "executor.config",
          "executor.registry", "executor.dispatch", "executor.live", "executor.faults", "executor.outbox",
          "executor.router_faults"]
#: what the executor may load of the planner's base layer (docs/architecture.md): PDD's rules (`pdd`) and
#: the plan's data, never the flow physics (`flows`, the queue laws), no solver, no faces
PLACER_BASE = {"placer", "placer.pdd", "placer.errors", "placer.plan", "placer.specs", "placer.catalog",
               "placer.perfmodel", "placer.problem", "placer.records", "placer.settings", "placer.profiles",
               "placer.fields", "placer.readers", "placer.plancheck", "placer.fleetplan", "placer.shapes",
               "placer.prefix", "placer.kv_admission", "placer.change_strategy", "placer.scenario_options"}
#: the performance model is a package, one module per layer: its modules come with it
PLACER_BASE |= {m.name for m in pkgutil.iter_modules(placer.perfmodel.__path__, "placer.perfmodel.")}


def _loaded(modules: list[str]) -> set[str]:
    """The modules a fresh interpreter holds after importing `modules`."""
    code = f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\nprint(*sorted(sys.modules))"
    return set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split())


def test_policy_modules_import_neither_torch_nor_ray():
    bad = {"torch", "ray"} & _loaded(POLICY)
    assert not bad, bad


def test_the_deploy_command_module_imports_neither_torch_nor_ray_nor_the_http_stack():
    bad = {"torch", "ray", "fastapi", "uvicorn", "httpx"} & _loaded(["executor.cli"])
    assert not bad, bad


def test_the_executor_reads_only_the_placer_base_layer():
    loaded = _loaded([*POLICY, "executor.router", "executor.cluster", "executor.deploy", "executor.server",
                      "executor.cli"])
    beyond = {m for m in loaded if m.split(".")[0] == "placer"} - PLACER_BASE
    assert not beyond, beyond
