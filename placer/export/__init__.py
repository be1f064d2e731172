"""Export a plan to the engines operators run: SGLang, vLLM, NVIDIA Dynamo, Kubernetes.

in:  a :class:`~placer.plan.Plan`, :class:`ExportSettings`, optionally the scenario's
     resolved Problem; out: ``{relative path: text}`` (``export_plan``), written by ``write``.

Modules: ``layout`` (the plan as pools and routers, the PDD parts engines lack and their
fallbacks), ``commands`` (SGLang and vLLM argv), ``scripts`` (``sglang``/``vllm`` launch
scripts and ``commands.json``), ``dynamo`` (graphs), ``k8s`` (manifests), ``readme``.
This package imports the base layer only (never torch, ray or the engines).

Before anything is generated the plan passes the one plan check (:mod:`placer.plancheck`:
against the scenario when one is given, else what the plan alone shows) and the bound on its
size (:data:`MAX_EXPORT_INSTANCE_NODES`). Names from the plan become paths only as slugs
(:mod:`placer.export.names`), and ``write`` refuses any path that would leave ``--out``.
"""

from __future__ import annotations

from pathlib import Path

from placer.errors import InputError
from placer.export.dynamo import render_dynamo
from placer.export.k8s import render_k8s
from placer.export.layout import ExportSettings, Layout, build_layout
from placer.export.names import inside
from placer.export.readme import render_readme
from placer.export.scripts import render_scripts
from placer.plan import Plan
from placer.plancheck import check_plan_or_alone, single_model_plan

FORMATS = ("sglang", "vllm", "dynamo", "k8s")
#: Most instance nodes (Σ over the deployed pools of count × nodes per instance) one export writes:
#: the scripts hold a command per instance node (about 1 kB each). 20,000 nodes is 160,000 chips
#: at 8 per node; a larger plan is refused (exit 2) before anything is generated.
MAX_EXPORT_INSTANCE_NODES = 20_000

__all__ = ["FORMATS", "MAX_EXPORT_INSTANCE_NODES", "ExportSettings", "Layout", "build_layout", "export_plan",
           "write"]


def export_plan(plan: Plan, fmt: str, settings: ExportSettings, problem=None, *, namespace: str = "placer",
                image: str | None = None) -> dict[str, str]:
    """Every file of the export of ``plan`` to ``fmt``, README.md included, by relative path."""
    if fmt not in FORMATS:
        raise InputError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    single_model_plan(plan, "placer export")
    check_plan_or_alone(problem, plan)
    layout = build_layout(plan, settings, problem)
    nodes = sum(p.count * p.nodes for p in layout.pools)
    if nodes > MAX_EXPORT_INSTANCE_NODES:
        raise InputError(f"pools: the plan deploys {nodes:,} instance nodes; placer export writes at most "
                         f"{MAX_EXPORT_INSTANCE_NODES:,} (a command per node): split the plan or lower its counts")
    if fmt in ("sglang", "vllm"):
        files = render_scripts(layout, fmt)
    elif fmt == "dynamo":
        files = render_dynamo(layout, image)
    else:
        files = render_k8s(layout, namespace, image)
    files["README.md"] = render_readme(layout, fmt, [*files, "README.md"])
    return dict(sorted(files.items()))


def write(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Write the files under ``out_dir`` (created); scripts become executable. Every path is checked
    to resolve inside ``out_dir`` first (InputError, nothing written, otherwise)."""
    for rel in files:
        inside(out_dir, rel)
    written = []
    for rel, text in files.items():
        path = Path(out_dir) / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as err:
            raise InputError(f"--out: cannot write {str(path)!r}: {err.strerror}") from None
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    return written
