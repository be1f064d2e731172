"""PD baselines in the same model, prices and SLA, for `placer compare`, the report and the frontier.

in:  a Problem
out: one Plan per baseline (or the reason it has none), each marked with its one-line rules:

* :mod:`placer.baselines.policies` — the baselines (``same-dc-pd``, ``cross-dc-pd``,
  ``hetero-same-dc-pd`` = Splitwise (alias ``splitwise``), ``prfaas``, ``agg``), each
  one's rules in one line and the MILP architectures that pose them;
* :mod:`placer.baselines.solve` — :func:`solve_baseline` (the best plan within a
  baseline's rules) and :func:`compare` (PDD beside every baseline, honest about load,
  inventory and applicability; PDD at its best BCR within the inventory too,
  :func:`best_within_inventory`, when a baseline is shown at partial load);
* :mod:`placer.baselines.summary` — :func:`within_inventory`: what each side serves within the
  inventory, as the compare JSON's ``within_inventory`` object;
* :mod:`placer.baselines.threshold` — :func:`best_variant`: the search over ``prfaas``'s (local
  datacenter, threshold θ) variants (capacity-bound pruning; only the winner evaluated).
"""

from placer.baselines.policies import (
    ALIASES, BASELINES, RULES, agg_architecture, architectures, canonical, not_applicable, prfaas_reading,
    prfaas_thresholds,
)
from placer.baselines.solve import (
    BEST_WITHIN_NOTE, NO_SLA_NOTE, NO_SLA_PARTIAL_NOTE, PARTIAL_NOTE, PDD_SOLVES, SCALE_MAX, SOLVES_PER_BASELINE,
    best_within_inventory, beyond_inventory, carries_less, chips_taken, compare, scale_to_load, sla_verdict,
    solve_baseline,
)
from placer.baselines.summary import within_inventory

__all__ = [
    "ALIASES", "BASELINES", "BEST_WITHIN_NOTE", "NO_SLA_NOTE", "NO_SLA_PARTIAL_NOTE", "PARTIAL_NOTE", "PDD_SOLVES",
    "RULES", "SCALE_MAX", "SOLVES_PER_BASELINE", "agg_architecture", "architectures", "best_within_inventory",
    "beyond_inventory", "canonical", "carries_less", "chips_taken", "compare", "not_applicable", "prfaas_reading",
    "prfaas_thresholds", "scale_to_load", "sla_verdict", "solve_baseline", "within_inventory",
]
