"""Whether an export runs the engine a plan's numbers assume.

in:  a :class:`~placer.plan.Plan` (its ``engine``) and an export format (:data:`placer.export.FORMATS`)
out: :data:`FORMAT_ENGINES` (the serving engine each format launches) and :func:`engine_warning`, the
     line ``placer export`` prints on stderr when that engine is not the plan's.

A plan made under ``engine: vllm`` sized its pools with vLLM's measured kernels; exporting it as SGLang
scripts deploys another engine, whose batch sizes and step times differ. The export still runs (the
layout is valid), but the figures the plan promises were not computed for what it deploys. A
``roofline`` plan assumes no engine: no warning.
"""

from __future__ import annotations

from placer.perfmodel.engines import ROOFLINE, split_engine

#: the serving engine each export format launches (Dynamo's graph and the k8s manifests run SGLang workers)
FORMAT_ENGINES = {"sglang": "sglang", "vllm": "vllm", "dynamo": "sglang", "k8s": "sglang"}


def engine_warning(plan_engine: str, fmt: str) -> str | None:
    """The warning for exporting a plan made under ``plan_engine`` (a scenario's spelling, ``vllm`` or
    ``vllm==0.24.0``: :attr:`placer.plan.EngineInfo.spec`) as ``fmt``, or None when they agree."""
    name, _ = split_engine(plan_engine)
    runs = FORMAT_ENGINES.get(fmt)
    if name == ROOFLINE or runs is None or runs == name:
        return None
    return (f"the plan's numbers assume engine {plan_engine}, but --format {fmt} deploys {runs}: its batch sizes and "
            f"step times were not computed for {runs} (re-plan with --engine {runs} to size the pools for it)")
