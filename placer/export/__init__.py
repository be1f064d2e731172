"""Export a plan to the engines operators run: SGLang, vLLM, NVIDIA Dynamo, Kubernetes.

in:  a :class:`~placer.plan.Plan`, :class:`ExportSettings`, optionally the scenario's
     resolved Problem; out: ``{relative path: text}`` (``export_plan``), written by ``write``.

Modules: ``layout`` (the plan as pools and routers, the PDD parts engines lack and their
fallbacks), ``commands`` (SGLang and vLLM argv), ``scripts`` (``sglang``/``vllm`` launch
scripts and ``commands.json``), ``dynamo`` (graphs), ``k8s`` (manifests), ``readme``.
This package imports the base layer only (never torch, ray or the engines).
"""

from __future__ import annotations

from pathlib import Path

from placer.errors import InputError
from placer.export.dynamo import render_dynamo
from placer.export.k8s import render_k8s
from placer.export.layout import ExportSettings, Layout, build_layout
from placer.export.readme import render_readme
from placer.export.scripts import render_scripts
from placer.plan import Plan
from placer.plancheck import single_model_plan

FORMATS = ("sglang", "vllm", "dynamo", "k8s")

__all__ = ["FORMATS", "ExportSettings", "Layout", "build_layout", "export_plan", "write"]


def export_plan(plan: Plan, fmt: str, settings: ExportSettings, problem=None, *, namespace: str = "placer",
                image: str | None = None) -> dict[str, str]:
    """Every file of the export of ``plan`` to ``fmt``, README.md included, by relative path."""
    if fmt not in FORMATS:
        raise InputError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    single_model_plan(plan, "placer export")
    layout = build_layout(plan, settings, problem)
    if fmt in ("sglang", "vllm"):
        files = render_scripts(layout, fmt)
    elif fmt == "dynamo":
        files = render_dynamo(layout, image)
    else:
        files = render_k8s(layout, namespace, image)
    files["README.md"] = render_readme(layout, fmt, [*files, "README.md"])
    return dict(sorted(files.items()))


def write(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Write the files under ``out_dir`` (created); scripts become executable."""
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
