"""Does a plan's promise meet the SLA? (issue 42: a plan never misses its SLA silently.)

in:  a :class:`~placer.problem.Problem` and the :class:`~placer.evaluate.Analysis` of a plan
out: (``sla_met``, the :class:`~placer.plan.SlaMiss` rows) for ``metrics.sla_met`` /
     ``metrics.sla_misses``; :func:`miss_words` puts them in one line for the CLI.

The SLA is the scenario's: TTFT P90 over the whole mix of served requests, and TPOT. The plan
misses it when its planned P90 (the rate-weighted mixture of every flow's TTFT law, as
``metrics.ttft_p90_s``) exceeds the SLA, or when its planned attainment (requests within the TTFT
budget and on a decode pool that keeps TPOT) falls below the 90 % that P90 means. (The goodput and
``metrics.sla_attainment`` also lose the requests whose own TPOT is over the SLA as their batch
wanders — the simulator's and the executor's count —; the P90's check does not.) A
:data:`TOLERANCE` absorbs the solver's numerical slack, never a modelling gap: the MILP plans at
its caps and :func:`placer.evaluate.analyze` recomputes at the plan's actual utilisations.

When the mix misses, the classes whose own planned P90 exceeds the SLA (or whose decode pools
miss TPOT) are listed after the mix's row (``request_class`` "*"), so a user sees which requests
break it.
"""

from __future__ import annotations

from collections import defaultdict

from placer.p_queues import mixture_quantile
from placer.plan import SlaMiss

#: Relative slack on the SLA before a plan is said to miss it (solver tolerance, not physics).
TOLERANCE = 0.005
#: P90: the share of requests the SLA wants within its TTFT.
QUANTILE = 0.90
MIX = "*"


def sla_status(problem, analysis) -> tuple[bool, list[SlaMiss]]:
    """``(met, misses)`` of a plan from its analysis (empty misses when met or nothing is served)."""
    flows = [f for f in analysis.flows if f.rps > 0]
    if not flows:
        return True, []
    sla = problem.ttft_p90_s
    m = analysis.metrics
    # the TTFT P90's attainment: within the budget on a pool that keeps TPOT (metrics.sla_attainment, the
    # goodput's, also loses the requests whose own TPOT is over the SLA: FlowLaw.prob_lost)
    attained = 1 - sum(f.rps * f.prob_late(sla) for f in flows) / sum(f.rps for f in flows)
    mix_late = m.ttft_p90_s > sla * (1 + TOLERANCE)
    mix_short = attained < QUANTILE - TOLERANCE
    if not (mix_late or mix_short):
        return True, []
    why = (f"TTFT P90 {m.ttft_p90_s:.3f} s > SLA {sla:g} s" if mix_late else
           f"{100 * attained:.1f} % within the TTFT SLA < {100 * QUANTILE:g} % (TPOT {problem.tpot_s:g} s)")
    misses = [SlaMiss(request_class=MIX, ttft_p90_s=m.ttft_p90_s, sla_attainment=attained, why=why)]
    by_class: dict[str, list] = defaultdict(list)
    for f in flows:
        by_class[f.request_class].append(f)
    for name, group in by_class.items():
        served = sum(f.rps for f in group)
        attained = 1 - sum(f.rps * f.prob_late(sla) for f in group) / served
        p90 = mixture_quantile(group, QUANTILE)
        slow = [f for f in group if not f.meets_tpot]
        if p90 > sla * (1 + TOLERANCE):
            words = f"TTFT P90 {p90:.3f} s > SLA {sla:g} s"
        elif slow:
            share = sum(f.rps for f in slow) / served
            words = f"{100 * share:.0f} % of it on decode pools over TPOT {problem.tpot_s:g} s"
        else:
            continue
        misses.append(SlaMiss(request_class=name, ttft_p90_s=p90, sla_attainment=attained, why=words))
    return False, misses


def miss_words(misses: list[SlaMiss]) -> str:
    """The misses in one line: the mix's reason, then the classes that miss."""
    if not misses:
        return ""
    head = next((m.why for m in misses if m.request_class == MIX), "")
    classes = [f"{m.model + '/' if m.model else ''}{m.request_class} ({m.why})" for m in misses
               if m.request_class != MIX]
    return head + (f"; classes that miss: {', '.join(classes)}" if classes else "")
