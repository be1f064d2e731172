"""The settings of Dinkelbach's iterations (:mod:`placer.ilp.dinkelbach`): the gaps each MILP proves, the shares of
the time the restricted rounds may take, and the switches for cutoffs, rounded hints and sub-MIPs — each with the
measurement that set it.

in:  nothing (constants)
out: the names :mod:`placer.ilp.dinkelbach` imports (and re-exports: tests and benches set them there, where its
     functions read them)

Split from :mod:`placer.ilp.dinkelbach` to keep it under ~400 lines; the values and their reasons are unchanged.
"""

from __future__ import annotations

ABS_GAP = 1e-4  # req/s: Dinkelbach objectives approach 0, where only an absolute gap closes
REL_GAP = 5e-3  # precision each MILP proves F(λ) to, relative to the goodput at stake (no cost bound known)
# The ratio's proven precision at which the iterations stop (the issue asks ≤ 1 %): a round whose plan and
# bound already prove the ratio within it ends the search, even when F(λ) is not yet within REL_GAP — the
# next round would only re-prove it (on sixteen-dc a whole proving MILP, ~50 s, that found nothing better).
TARGET_GAP = 0.01
# Relative gap of the first MILP, whose plan only seeds λ (exactness comes from the rounds after it): 0.3 lets
# HiGHS stop at its first good plan instead of proving it — on the examples the same seed plan, 20-50 % less
# time in that MILP (0.02 before).
SEED_GAP = 0.3
# Share of TARGET_GAP a proving MILP may leave open on F(λ) (the rest is margin for the plan it finds being
# better than the last: the ceiling is then measured from a higher λ).
PROOF_SHARE = 0.9
# The restricted seed (:func:`_restricted_seed`) is tried when it leaves out at least this share of the pools'
# count variables; else the seed MILP runs on the whole model.
RESTRICT_MIN_SHARE = 0.5
# Dinkelbach rounds on the restricted model after its seed: one step lands near the final ratio (0.05-0.2 %
# below on sixteen-dc, 0.4 % on eight-dc); a second would only prove the restricted optimum, which the rounds
# on the whole model prove again (~1 s on eight-dc).
RESTRICTED_ROUNDS = 1
# Share of the time left that the restricted round may take (the seed's plan stands if it ends first): on 16 sites ×
# 12 classes it took 54 of 60 s, its bound valid only on the restricted pools, so the rounds on the whole model
# that certify the gap never ran (a 25 % gap at the time limit); sixteen-dc's takes ~1 s of 300.
RESTRICTED_SHARE = 0.25
# ... and the second restricted round's (:func:`_resited`), on the sites the LP opens at the seed's ratio: on 16 sites
# × 12 classes at 60 s, 0.25 / 0.5 / 0.75 gave BCR 279.6 / 285.0 / 285.0 and a certified gap of 7.4 (3 runs) /
# 5.3-9.7 (5 runs, median 6.3) / 9.7 % (a higher ratio lowers the whole model's bound on F(λ); too little time left
# for the whole model's round raises it: at 0.5 it gets ~28 s, near what its root needs on 2 shared cores).
RESITED_SHARE = 0.5
MAX_ITERATIONS = 30
# The rounds on the whole model of models with at least this many integer columns prove with a cutoff (``prove``
# in :func:`_iterate`): it pays where reduced-cost fixing has many pools to drop — eight-dc (203) 2.5 -> 1.4 s,
# sixteen-dc (430) 19 -> 10 s a proving MILP on 2 loaded cores; pdd-two-dc (30) proved its plan exactly in
# 0.25 s (certified gap 0) and with the cutoff took as long to a gap of 0.9 % (it proves only what is asked).
CUTOFF_INTEGERS = 100
# The seed MILP of a small model that the restricted seed leaves whole starts from the LP rounded
# (:mod:`placer.ilp.rounding`) when it gives a plan. Solve CPU (LP, rounding, seed and proofs; medians of
# 5 on 2 shared cores; 0e354d9 with and without this): rnd-7-19 (random catalog scenarios, seed 7)
# 10.5 -> 8.4 s, rnd-7-17 0.85 -> 0.73 s, rnd-7-7 0.54 -> 0.61 s; pdd-two-dc 0.50 -> 0.33 s on 9fd1b9a
# (HiGHS's root finds no plan of its seed model and branches for one); the same ratios.
ROUND_HINT = True
# Whether a seed MILP on the whole model of a model under ROUND_FIRST_INTEGERS runs HiGHS's sub-MIP heuristics
# (:data:`placer.ilp.highs.SUB_MIP_HEURISTICS`; a large model's seed keeps them: its first plan comes from them).
# Without them, and without the decode covers (C18, taken after the seed: :func:`_iterate`), rnd-7-19-trace
# (79 integer columns, full inventories, whole-instance P tiers; the rounding gives none) finds its first plan in
# 6.3 s; 14.3 s with the covers, 17.8 s with the sub-MIPs (its root's RINS/RENS searched ~14 s in vain), so
# none within 20 s on 2 loaded cores. pdd-two-dc's seed 0.76-1.14 s without them against 1.31-1.34 s, the same plan.
SMALL_SEED_SUB_MIPS = False
# Non-zeros (with the rows the proving rounds add: C18, C19) from which a model solved from a plan in hand gets no
# proving MILP on the whole model: HiGHS's MIP presolve does not check its time limit, and it took 60 s on 64 sites ×
# 12 classes (1.02 M) and had not ended at 300 s on 100 × 12 (1.75 M: the guard ended it at the limit, with no bound
# and no better plan); with presolve off its root LP took 39 s by interior point and 200 s of cuts moved its bound on
# F(λ) at 1.02 × the plan's ratio from 37.1 to 36.6 req/s (the proof needs 0). The time left goes to the search by
# groups of datacenters on the whole model instead (:mod:`placer.ilp.improve`, lines included), the LP relaxation's best
# ratio the certificate (:mod:`placer.ilp.lp_ratio`): 100 × 12 at 300 s, 15.98 % (BCR 241.64) -> 7.35 % (244.99).
# 64 × 12 (1.02 M) and 100 × 8 (1.20 M) presolve, but at 300 s their proving rounds ended at the LP's bound with no
# better plan — 64 × 12 10.6 % (369.9), 100 × 8 19.5 % (212.9) — where this path gives 5.6 % (387.5) and 10.3 % (215.5);
# below 0.9 M no large model from a local plan is measured (50 × 12, 0.92 M, has 902 integer columns: not large).
PROOF_NONZEROS = 900_000
# Share of the time left that such a model's LP ratio bound (:mod:`placer.ilp.lp_ratio`: Dinkelbach on the LP
# relaxation, with C18 and C19) may take before the search where it cannot run beside it (no fork): 100 × 12's two LPs
# took 34 + 33 s of the ~260 s left.
LP_RATIO_SHARE = 0.5
