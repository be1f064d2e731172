"""The import rules of docs/architecture.md, checked on the source (no import is executed).

A rule names a set of modules and what they may not import, either anywhere in the
module ("never") or at module level ("at import": the planner must start without
torch, triton, ray or the service libraries). Imports under ``if TYPE_CHECKING:`` do
not run and are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("placer", "db", "executor", "profiler", "placer_kernels")
HEAVY = ("torch", "triton", "ray")
SERVICE_LIBS = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "apscheduler", "psycopg")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str) -> list[tuple[str, bool]]:
    """(imported module, at module level) for every import that runs."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, top)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, top) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:  # relative: resolve against this module's package
                    base = module.split(".")[: -child.level] if child.level else []
                    name = ".".join([*base, *([child.module] if child.module else [])])
                else:
                    name = child.module or ""
                found.append((name, top))
                found.extend((f"{name}.{alias.name}", top) for alias in child.names)
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(tree, True)
    return found


def _sources() -> dict[str, list[tuple[str, bool]]]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            module = _module_name(path)
            out[module] = _imports(ast.parse(path.read_text(), str(path)), module)
    return out


SOURCES = _sources()


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules(*prefixes: str, but: tuple[str, ...] = ()) -> list[str]:
    return [m for m in SOURCES if _within(m, prefixes) and not _within(m, but)]


FACES = ("placer.cli", "placer.service")
LIBRARY = _modules("placer", but=FACES)  # the planner: base layer + library
CHECKERS = _modules("placer.evaluate", "placer.queue_laws", "placer.pool_usage", "placer.validate", "placer.sim")

RULES = [
    # (modules, forbidden prefixes, only at module level?, why)
    (LIBRARY, ("placer.cli", "placer.service", "db", "executor", "profiler"), False,
     "the planner library never imports its faces, the service, db, the executor or the profiler"),
    (LIBRARY, HEAVY + SERVICE_LIBS, True,
     "the planner's import path holds no torch, triton, ray or service library"),
    (_modules("placer"), ("executor", "profiler"), False,
     "placer never imports the executor or the profiler (they plug in through entry points)"),
    (_modules("placer", but=("placer.service",)), ("db",), False,
     "placer/service is the only part of placer that imports db"),
    (_modules("db"), ("placer", "executor", "profiler", "placer_kernels"), False,
     "db stores plain data and imports nothing of the project"),
    (_modules("placer_kernels"), ("placer", "executor", "profiler", "db"), False,
     "placer_kernels imports nothing of the project"),
    (CHECKERS, ("placer.ilp",), False,
     "evaluate, validate and the simulator take PDD's rules from placer.pdd and its physics from placer.flows "
     "and placer.p_queues, "
     "never from the MILP"),
    (_modules("executor"), ("placer.flows", "placer.p_queues", "placer.perfmodel", "placer.queueing", "placer.ttft_tail"),
     False,
     "the executor takes PDD's rules from placer.pdd, never the planner's physics"),
    (_modules("executor.routing", "executor.handoff", "executor.admission", "executor.engine.radix_cache",
              "executor.engine.scheduler", "executor.engine.block_pool"), HEAVY, False,
     "policy code imports neither torch nor ray (it is tested on CPU in milliseconds)"),
]


@pytest.mark.parametrize("modules,forbidden,at_import,why", RULES, ids=[r[3] for r in RULES])
def test_import_rule(modules, forbidden, at_import, why):
    assert modules, f"the rule '{why}' names no module: the layout changed under it"
    broken = sorted({f"{m} imports {name}" for m in modules for name, top in SOURCES[m]
                     if (top or not at_import) and _within(name, forbidden)})
    assert not broken, f"{why}:\n" + "\n".join(broken)


@pytest.mark.parametrize("module,what", [("placer.pdd", "the dictionary"),
                                         ("placer.prefix", "the prefix-cache protocol"),
                                         ("placer.kv_admission", "the KV admission rule"),
                                         ("placer.change_strategy", "the make-/break-before-make rule")])
def test_base_modules_the_executor_reads_import_only_the_standard_library(module, what):
    # PDD's dictionary and the prefix-cache protocol are read by every layer, the executor
    # included: they must not drag the physics (or anything else of ours) in.
    import sys

    ours = [name for name, _ in SOURCES[module]
            if name.split(".")[0] not in sys.stdlib_module_names and name != "__future__"
            and not name.startswith("__future__.")]
    assert not ours, f"{module} imports {ours}: it is {what}, standard library only"


def test_the_checker_sees_imports_inside_functions():
    tree = ast.parse("import os\ndef f():\n    import torch\nif TYPE_CHECKING:\n    import ray\n")
    assert _imports(tree, "m") == [("os", True), ("torch", False)]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_installed_distribution_ships_a_package_of_the_same_name(package):
    # transformers 5.25 began to depend on Hugging Face's `kernels`; a top-level `kernels` of ours then
    # shadowed it and every transformers import failed. A name another installed distribution ships
    # is that failure waiting for the next dependency release.
    import importlib.metadata

    others = sorted(set(importlib.metadata.packages_distributions().get(package, [])) - {"placer"})
    assert not others, f"top-level package {package!r} is also shipped by {others}: one shadows the other"
