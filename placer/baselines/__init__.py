"""PD baselines in the same model, prices and SLA, for `placer compare`, the report and the frontier.

in:  a Problem
out: one Plan per baseline (or the reason it has none), each marked with its one-line rules:

* :mod:`placer.baselines.policies` — the baselines (``same-dc-pd``, ``cross-dc-pd``,
  ``hetero-same-dc-pd`` = Splitwise (alias ``splitwise``), ``prfaas``, ``agg``), each
  one's rules in one line and the MILP architectures that pose them;
* :mod:`placer.baselines.solve` — :func:`solve_baseline` (the best plan within a
  baseline's rules) and :func:`compare` (PDD beside every baseline, honest about load,
  inventory and applicability).
"""

from placer.baselines.policies import (
    ALIASES, BASELINES, RULES, agg_architecture, architectures, canonical, not_applicable, prfaas_reading,
)
from placer.baselines.solve import (
    SCALE_MAX, beyond_inventory, carries_less, chips_taken, compare, scale_to_load, sla_verdict, solve_baseline,
)

__all__ = [
    "ALIASES", "BASELINES", "RULES", "SCALE_MAX", "agg_architecture", "architectures", "beyond_inventory",
    "canonical", "carries_less", "chips_taken", "compare", "not_applicable", "prfaas_reading", "scale_to_load",
    "sla_verdict", "solve_baseline",
]
