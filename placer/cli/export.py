"""``placer export PLAN.json --format sglang|vllm|dynamo|k8s``: a thin face over :mod:`placer.export`
(a fleet plan: :func:`placer.export.fleet.export_fleet`, a folder per model).

Reads the plan (and, with ``--scenario``, the scenario it was made for: dtypes, DRC, custom
chips, and the flow physics that price each fallback), builds :class:`ExportSettings`, calls
:func:`placer.export.export_plan` and writes the files under ``--out``. Bad input ends with
exit 2 and a message naming the option or field.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from placer.cli.output import choices, err, fail, out
from placer.errors import InputError, PlacerError
from placer.export import FORMATS, ExportSettings, export_plan, write
from placer.export.engine import engine_warning
from placer.export.fleet import export_fleet, fleet_models
from placer.export.names import slug
from placer.plan import Plan, load_plan
from placer.problem import Problem, resolve, resolve_fleet
from placer.specs import load_scenario

Format = choices("Format", FORMATS)


def settings_for(plan: Plan, problem: Problem | None, model: str | None, model_dir: Path | None,
                 served_name: str | None, chips_per_node: int) -> ExportSettings:
    """The engines' settings: the model from ``--model``/``--model-dir`` (else the Hugging Face id the
    catalog gives the scenario's model, ``placer catalog models``), dtypes, DRC and chip vendors from the
    scenario when one is given."""
    if model and model_dir:
        raise InputError("give either --model or --model-dir, not both")
    if model_dir is not None:
        if not model_dir.is_dir():
            raise InputError(f"--model-dir: {str(model_dir)!r} is not a directory")
        model = str(model_dir.resolve())
    if problem is not None and problem.name != plan.scenario:
        raise InputError(f"--scenario: the plan was made for scenario {plan.scenario!r}, this file is "
                         f"{problem.name!r}")
    if model is None:
        if problem is None:
            raise InputError("--model: give the model the engines load (--model NAME or --model-dir DIR), "
                             "or --scenario to use the Hugging Face id of the scenario's model")
        if not problem.model.hf_id:
            raise InputError(f"--model: the scenario's model {problem.model.name!r} is not in the catalog, so it "
                             "has no Hugging Face id; give --model NAME or --model-dir DIR")
        model = problem.model.hf_id
    served = served_name or (problem.model.name if problem is not None else Path(model).name)
    if problem is None:
        return ExportSettings(model, served, chips_per_node=chips_per_node)
    return ExportSettings(model, served, kv_dtype=problem.kv_dtype, weight_dtype=problem.weight_dtype,
                          native_weight_dtype=problem.model.native_weight_dtype, drc=bool(problem.options.drc),
                          chips_per_node=chips_per_node,
                          chip_vendors={name: chip.vendor for name, chip in problem.chips.items()})


def fleet_settings(plan: Plan, fleet, models: list[str], model_dirs: list[Path], served_name: str | None,
                   chips_per_node: int) -> dict[str, ExportSettings]:
    """Each fleet model's settings: its checkpoint from ``--model NAME=ID`` / ``--model-dir NAME=DIR``, else
    the catalog's Hugging Face id of the model the scenario gives it; dtypes, DRC and vendors from its part
    of the scenario. The served model name is the fleet's model name (as ``placer deploy`` serves a fleet)."""
    if served_name is not None:
        raise InputError("--served-model-name: a fleet's models are served under their names in the plan")
    if fleet is not None and fleet.name != plan.scenario:
        raise InputError(f"--scenario: the plan was made for scenario {plan.scenario!r}, this file is "
                         f"{fleet.name!r}")
    names = fleet_models(plan)
    given: dict[str, str] = {}
    for option, values in (("--model", models), ("--model-dir", model_dirs)):
        for value in values:
            name, sep, where = str(value).partition("=")
            if not sep or name not in names:
                raise InputError(f"{option}: a fleet plan takes NAME=VALUE per model (models: {', '.join(names)}), "
                                 f"got {str(value)!r}")
            if name in given:
                raise InputError(f"{option}: model {name!r} is given twice")
            if option == "--model-dir":
                if not Path(where).is_dir():
                    raise InputError(f"--model-dir: {where!r} is not a directory")
                where = str(Path(where).resolve())
            given[name] = where
    members = dict(fleet.members) if fleet is not None else {}
    out = {}
    for name in names:
        member = members.get(name)
        checkpoint = given.get(name) or (member.model.hf_id if member is not None else "")
        if not checkpoint:
            raise InputError(f"--model: no checkpoint for model {name!r}: give --model {name}=ID (or --model-dir "
                             f"{name}=DIR), or --scenario when the scenario names a catalog model")
        if member is None:
            out[name] = ExportSettings(checkpoint, name, chips_per_node=chips_per_node)
        else:
            out[name] = ExportSettings(checkpoint, name, kv_dtype=member.kv_dtype, weight_dtype=member.weight_dtype,
                                       native_weight_dtype=member.model.native_weight_dtype,
                                       drc=bool(member.options.drc), chips_per_node=chips_per_node,
                                       chip_vendors={c: chip.vendor for c, chip in member.chips.items()})
    return out


def export(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.json", help="Plan to export.", show_default=False)],
    fmt: Annotated[Format, typer.Option("--format", help="Target: SGLang or vLLM launch scripts, a Dynamo graph, "
                                        "Kubernetes manifests.", show_default=False)],
    model: Annotated[list[str] | None, typer.Option("--model", help="Model the engines load (a Hugging Face "
                                                    "name; default: the catalog's id for the scenario's model). "
                                                    "Fleet plans: NAME=ID, once per model.")] = None,
    model_dir: Annotated[list[Path] | None, typer.Option("--model-dir", help="Local checkpoint directory the "
                                                         "engines load. Fleet plans: NAME=DIR.")] = None,
    scenario: Annotated[Path | None, typer.Option("--scenario", help="The plan's scenario: dtypes, DRC, custom "
                                                  "chips, and what each fallback costs.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder (default: ./<scenario>-<format>, "
                                                 "the scenario's name in DNS-label form).",
                                                 show_default=False)] = None,
    served_name: Annotated[str | None, typer.Option("--served-model-name", help="Name clients ask for "
                                                    "(default: the model's).")] = None,
    chips_per_node: Annotated[int, typer.Option("--chips-per-node", help="Accelerators per node; a larger tp "
                                                "spans several nodes.")] = 8,
    namespace: Annotated[str, typer.Option("--namespace", help="k8s: the namespace of the manifests.")] = "placer",
    image: Annotated[str | None, typer.Option("--image", help="k8s/dynamo: the engine image (default: the "
                                              "release the export was checked against).")] = None,
) -> None:
    """Write what an operator runs for a plan on SGLang, vLLM, Dynamo or Kubernetes."""
    fmt_name = fmt.value if isinstance(fmt, Enum) else str(fmt)
    try:
        plan = load_plan(plan_file)
        loaded = load_scenario(scenario) if scenario is not None else None
        if fleet_models(plan):  # a fleet plan: a folder per model (placer/export/README.md, "Fleets")
            fleet = resolve_fleet(loaded) if loaded is not None else None
            per_model = fleet_settings(plan, fleet, model or [], model_dir or [], served_name, chips_per_node)
            files = export_fleet(plan, fmt_name, per_model, fleet, namespace=namespace, image=image)
        else:
            if len(model or []) > 1 or len(model_dir or []) > 1:
                raise InputError("--model / --model-dir: give one (several only for a fleet plan, NAME=VALUE)")
            problem = resolve(loaded) if loaded is not None else None
            settings = settings_for(plan, problem, (model or [None])[0], (model_dir or [None])[0], served_name,
                                    chips_per_node)
            files = export_plan(plan, fmt_name, settings, problem, namespace=namespace, image=image)
        # the default folder is named after the plan's scenario: a slug, never a path (``../../x``)
        target = out_dir if out_dir is not None else Path(f"{slug(plan.scenario)}-{fmt_name}")
        write(files, target)
    except PlacerError as e:
        fail(e)
    warning = engine_warning(plan.engine.spec, fmt_name)
    if warning:
        err.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)
    out.print(f"wrote {len(files)} files to {target}/ (see {target}/README.md for what {fmt_name} cannot express)",
              highlight=False, soft_wrap=True)
