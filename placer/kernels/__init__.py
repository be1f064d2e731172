"""The engines' measured per-kernel tables (imported from NVIDIA AIConfigurator's database).

in:  the shipped tables under ``placer/kernels/data`` (see docs/kernels.md)
out: ``load(system, engine, version)`` → :class:`OpTables` (seconds per kernel call, or None
     where not measured); ``available()``; ``system_for_chip(chip)``.
"""

from placer.kernels.tables import FAMILIES, OpTables, available, load, system_for_chip

__all__ = ["FAMILIES", "OpTables", "available", "load", "system_for_chip"]
