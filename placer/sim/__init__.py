"""Discrete-event simulator of a PDD plan (see README.md beside this file).

Public surface: :func:`simulate` (scenario + plan → :class:`SimResult`), :class:`SimConfig`.
"""

from placer.sim.config import SimConfig
from placer.sim.engine import Simulation, simulate
from placer.sim.result import SimResult

__all__ = ["SimConfig", "SimResult", "Simulation", "simulate"]
