"""Discrete-event simulator of a PDD plan (see README.md beside this file).

Public surface: :func:`simulate` (scenario + plan → :class:`SimResult`), :class:`SimConfig`,
:class:`ExecutorRuntime` (``SimConfig.runtime``: replay the executor as it serves on one host).
"""

from placer.sim.config import SimConfig
from placer.sim.engine import Simulation, simulate
from placer.sim.result import SimResult
from placer.sim.runtime import ExecutorRuntime

__all__ = ["ExecutorRuntime", "SimConfig", "SimResult", "Simulation", "simulate"]
