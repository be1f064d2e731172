"""The serving engine a prediction assumes: the seam between the roofline and measured kernels.

in:  an instance's roofline model (:class:`~placer.perfmodel.InstanceModel` or a shape's subclass) and
     an engine (:data:`placer.specs.ENGINES`, optionally ``name==version``)
out: the model whose forwards are composed from that engine's measured kernels
     (:mod:`placer.perfmodel.kernel_model`) where they cover the chip, transferred from the nearest
     measured chip where they do not, else the roofline; ``source`` says which answered.

Every constructor of instance models (:func:`placer.flows.instance`,
:func:`placer.profiles.lookup.measured_instance`, ``placer estimate``) passes its model through
:func:`engine_model`, so the planner, the simulator and ``estimate`` see one engine. A measured
latency table (:class:`~placer.profiles.measured.MeasuredInstanceModel`, the user's own measurement
of the whole forward) wins over the kernels: it is returned as it is.

The nearest measured chip (:func:`nearest_measured`), for a chip the database does not cover: among the
chips with tables for the engine (and version), the same vendor and architecture first (H800, H20 ←
H100/H200, Hopper), then the same vendor, then any; inside a tier the same tensor-core types (fp8, fp4
rates present or not: a reference without fp8 has no fp8 kernels), then the closest ridge point (bf16
peak / HBM bandwidth, in log), so a kernel's compute- or memory-boundness at a shape carries over. A
custom chip (``chips:`` with ``base:``) has no architecture in the catalog and ranks by vendor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import lru_cache

from placer.catalog import Chip, _rows, chip_catalog
from placer.perfmodel.instance import InstanceModel
from placer.perfmodel.kernel_model import KernelForward
from placer.perfmodel.op_costs import OpCosts
from placer.shapes import DEPModel, TPAttentionMoEModel

ROOFLINE = "roofline"


def split_engine(engine: str) -> tuple[str, str | None]:
    """``"vllm==0.24.0"`` → ``("vllm", "0.24.0")``; ``"sglang"`` → ``("sglang", None)``."""
    name, _, version = engine.partition("==")
    return name, (version or None)


def unknown_version(engine: str) -> str | None:
    """Why ``engine`` names a version placer ships no tables for (``roofline`` takes none), else None."""
    name, version = split_engine(engine)
    if version is None:
        return None
    if name == ROOFLINE:
        return "the roofline has no versions"
    shipped = sorted({v for _, e, v in _tables_api().available() if e == name})
    if version in shipped:
        return None
    return f"no measured tables for {name} {version}; shipped versions: {', '.join(shipped) or 'none'}"


@dataclass(frozen=True)
class KernelInstanceModel(KernelForward, InstanceModel):
    """A dense (or single-chip) instance answered by measured kernels."""

    ops: OpCosts = field(default=None, kw_only=True, compare=False)  # type: ignore[assignment]


@dataclass(frozen=True)
class KernelDEPModel(KernelForward, DEPModel):
    """An MoE instance, attention data parallel × experts expert parallel, answered by measured kernels."""

    ops: OpCosts = field(default=None, kw_only=True, compare=False)  # type: ignore[assignment]


@dataclass(frozen=True)
class KernelTPAttentionMoEModel(KernelForward, TPAttentionMoEModel):
    """An MoE instance, attention tensor parallel × experts expert parallel, answered by measured kernels."""

    ops: OpCosts = field(default=None, kw_only=True, compare=False)  # type: ignore[assignment]


_KERNEL_CLASSES = {InstanceModel: KernelInstanceModel, DEPModel: KernelDEPModel,
                   TPAttentionMoEModel: KernelTPAttentionMoEModel}


@lru_cache(maxsize=1)
def chip_archs() -> dict[str, str]:
    """Catalog chip → architecture (chips.csv ``arch``)."""
    return {row["name"]: row.get("arch", "") for row in _rows("chips.csv")}


def _tables_api():
    """placer.kernels' lookup (imported late: the package reads its shipped data on first use)."""
    from placer import kernels
    return kernels


def measured_chips(engine: str) -> list[tuple[Chip, str, object]]:
    """(catalog chip, system, tables) for every catalog chip the engine's tables cover."""
    name, version = split_engine(engine)
    api = _tables_api()
    out = []
    for chip in chip_catalog().values():
        system = api.system_for_chip(chip.name)
        tables = api.load(system, name, version) if system else None
        if tables is not None:
            out.append((chip, system, tables))
    return out


def nearest_measured(chip: Chip, engine: str) -> tuple[Chip, str, object] | None:
    """The measured chip whose tables stand in for ``chip`` (module docstring), or None."""
    candidates = measured_chips(engine)
    if not candidates:
        return None
    archs = chip_archs()

    def ridge(c: Chip) -> float:
        return c.bf16_tflops / c.mem_bw_tbps

    def rank(item: tuple[Chip, str, object]) -> tuple:
        c = item[0]
        same_vendor = c.vendor == chip.vendor
        same_arch = same_vendor and archs.get(c.name) == archs.get(chip.name) and bool(archs.get(c.name))
        tier = 0 if same_arch else 1 if same_vendor else 2
        # the same tensor-core types first: a reference without fp8 (or fp4) has no tables for such weights
        types = (bool(c.fp8_tflops) != bool(chip.fp8_tflops)) + (bool(c.fp4_tflops) != bool(chip.fp4_tflops))
        return tier, types, abs(math.log(ridge(c) / ridge(chip))), c.name

    return min(candidates, key=rank)


@lru_cache(maxsize=256)
def op_costs(chip: Chip, engine: str) -> OpCosts | None:
    """The chip's op costs under ``engine``: its own tables, the nearest measured chip's (transferred),
    or None (roofline: no tables for this engine at all)."""
    name, version = split_engine(engine)
    if name == ROOFLINE:
        return None
    api = _tables_api()
    system = api.system_for_chip(chip.name)
    tables = api.load(system, name, version) if system else None
    if tables is not None:
        return OpCosts(chip, tables, chip, f"measured kernels ({name} {tables.version}, {system})")
    near = nearest_measured(chip, engine)
    if near is None:
        return None
    ref_chip, ref_system, tables = near
    ref_chip = chip_catalog()[ref_chip.name]
    return OpCosts(chip, tables, ref_chip, f"transferred from {ref_system} {name} {tables.version}")


def engine_model(base: InstanceModel, engine: str = ROOFLINE) -> InstanceModel:
    """``base`` answered by ``engine``'s measured kernels where they cover its chip (transferred from the
    nearest measured chip otherwise); ``base`` itself for ``roofline``, for a measured latency table
    (the user's own measurement wins) and where no tables exist for the engine."""
    if split_engine(engine)[0] == ROOFLINE or isinstance(base, KernelForward):
        return base
    cls = _KERNEL_CLASSES.get(type(base))
    if cls is None:  # a MeasuredInstanceModel, or a model class this module does not know
        return base
    ops = op_costs(base.chip, engine)
    if ops is None:
        return base
    return cls(**{f.name: getattr(base, f.name) for f in fields(base)}, ops=ops)
