"""Replanning judged in simulation (see README.md beside this file).

Public surface: :func:`adopt` and :class:`AdoptionRule` (the replanning jobs' adoption rule),
:class:`Timeline` (a workload over a day), :class:`Startup` (what a plan change costs),
:func:`run_day` (the four fleets over a day).
"""

from placer.replan.adoption import Adoption, AdoptionRule, Verdict, adopt

__all__ = ["Adoption", "AdoptionRule", "Verdict", "adopt"]
