"""The serving engine a prediction assumes: the seam between the roofline and measured kernels.

in:  an instance's roofline model (:class:`~placer.perfmodel.InstanceModel` or a shape's subclass) and
     an engine (:data:`placer.specs.ENGINES`, optionally ``name==version``)
out: the model whose times come from that engine's measured kernels where they cover the chip
     (placer.kernels), else the roofline; ``source`` says which answered.

Every constructor of instance models (:func:`placer.flows.instance`,
:func:`placer.profiles.lookup.measured_instance`, ``placer estimate``) passes its model through
:func:`engine_model`, so the planner, the simulator and ``estimate`` see one engine.
"""

from __future__ import annotations

from placer.perfmodel.instance import InstanceModel

ROOFLINE = "roofline"


def split_engine(engine: str) -> tuple[str, str | None]:
    """``"vllm==0.24.0"`` → ``("vllm", "0.24.0")``; ``"sglang"`` → ``("sglang", None)``."""
    name, _, version = engine.partition("==")
    return name, (version or None)


def engine_model(base: InstanceModel, engine: str = ROOFLINE) -> InstanceModel:
    """``base`` answered by ``engine``'s measured kernels where they cover its chip (placeholder until
    placer.kernels lands: every engine answers from the roofline)."""
    return base
