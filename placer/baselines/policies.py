"""The baselines' policies: each one's rules in one line, and the MILP architectures that pose them.

in:  a Problem and a baseline name (or an alias: ``splitwise``)
out: :data:`RULES` (the one-line rule each baseline prints in ``compare``, its JSON
     ``baseline.rules`` and the report), :func:`architectures` (the
     :class:`~placer.ilp.formulation.Architecture` variants the MILP solves; the best is
     kept), :func:`not_applicable` (why a baseline has no meaning in a scenario, e.g. a
     cross-datacenter one in one datacenter), :func:`prfaas_thresholds` (the thresholds
     ``prfaas`` tries) and :func:`prfaas_reading` (the local datacenter and the
     uncached-token threshold of a ``prfaas`` plan).

``prfaas`` — Prefill-as-a-Service across datacenters (Qin et al., 2026): requests enter
and decode in a *local* datacenter; only prompts with many uncached tokens are prefilled
in a remote, compute-rich datacenter and their KV shipped back over the line; the rest
are prefilled locally over RDMA; no RelayDecode. The scenario names no entry point, so
"local" is where decode sits: each datacenter with a line into it is tried as the local
one (decode only there, prefill there or in any datacenter with a line to it). The
threshold θ on uncached tokens (1 − h)·I is **enforced**: every class with at least θ
uncached tokens is prefilled remotely, every other one locally, each class wholly on one
side — the remote P pools admit only the classes above θ and the local ones only those
below, each through "set" queues (C13 of :mod:`placer.ilp.formulation` over the subset,
its wait law the subset's mix, :func:`placer.p_queues.set_wait_law`). θ is optimised by
enumeration: with K classes only K + 1 rules differ (θ at each distinct uncached count,
and above the longest: nothing remote), so every (local datacenter, θ) pair is one
variant and the best BCR is kept — exact over thresholds, each variant a smaller MILP than
the free split (each class on one side's pools), and no new integer rows in the model. The
line carries what PDD's P-MD would (``options.drc``: the uncached tokens' KV, the local
decoder keeping the prefix) so both sides pay the same bytes per request.

``splitwise`` — heterogeneous P and D chips in one datacenter over RDMA: that is what
``hetero-same-dc-pd`` solves, so ``splitwise`` is an alias of it, not a second baseline.
"""

from __future__ import annotations

from placer.ilp.formulation import Architecture
from placer.ilp.p_cuts import uncached_tokens
from placer.pdd import P_A, P_D, P_MD
from placer.plan import Plan
from placer.problem import Problem

BASELINES = ("same-dc-pd", "cross-dc-pd", "hetero-same-dc-pd", "prfaas", "agg")
ALIASES = {"splitwise": "hetero-same-dc-pd"}

RULES = {
    "same-dc-pd": "one chip type in one datacenter, P and D over RDMA, no KV over any line "
                  "(each datacenter and chip tried, the best kept)",
    "cross-dc-pd": "P in one datacenter, D in another, every request's full KV over the line "
                   "(no decode-side cache, no RelayDecode)",
    "hetero-same-dc-pd": "Splitwise: P and D on any chip types of one datacenter, KV over RDMA "
                         "(each datacenter tried, the best kept)",
    "prfaas": "PrfaaS: decode in one local datacenter; prompts with at least θ uncached tokens prefilled in "
              "another datacenter and their KV shipped back over the line, the rest prefilled locally, each "
              "class wholly on one side (θ optimised over the classes' uncached lengths); no RelayDecode "
              "(each local datacenter tried)",
    "agg": "aggregated serving only (chunked prefill in decode batches), any chips in any "
           "datacenters; no KV moves",
}

_CROSS_DC = ("cross-dc-pd", "prfaas")


def canonical(name: str) -> str:
    """The baseline ``name`` stands for (an alias resolved); ValueError for an unknown name."""
    name = ALIASES.get(name, name)
    if name not in BASELINES:
        known = ", ".join([*BASELINES, *(f"{a} (= {b})" for a, b in ALIASES.items())])
        raise ValueError(f"unknown baseline {name!r}; known: {known}")
    return name


def _lines_into(problem: Problem) -> dict[str, list[str]]:
    """Datacenter → the datacenters with a line of nonzero bandwidth into it."""
    into: dict[str, list[str]] = {}
    for (src, dst), link in problem.links.items():
        if link.gbit_per_s > 0 and src != dst:
            into.setdefault(dst, []).append(src)
    return into


def not_applicable(problem: Problem, name: str) -> str | None:
    """Why baseline ``name`` has no meaning in the scenario ("not applicable: one
    datacenter"), or None. A cross-datacenter baseline needs two datacenters and a line."""
    if canonical(name) not in _CROSS_DC:
        return None
    if len(problem.datacenters) < 2:
        return "not applicable: one datacenter"
    if not _lines_into(problem):
        return "not applicable: no line between the datacenters"
    return None


def architectures(problem: Problem, name: str) -> list[Architecture]:
    """The variants the MILP solves for baseline ``name`` (the best BCR is kept)."""
    name = canonical(name)
    if name == "same-dc-pd":
        return [
            Architecture(name, (P_D,), drc=False, p_dcs=frozenset({dc.name}), decode_dcs=frozenset({dc.name}),
                         chips=frozenset({chip}), same_dc=True)
            for dc in problem.datacenters for chip in sorted(dc.inventory)
        ]
    if name == "cross-dc-pd":
        return [Architecture(name, (P_D,), drc=False, same_dc=False)]
    if name == "hetero-same-dc-pd":
        return [
            Architecture(name, (P_D,), drc=False, p_dcs=frozenset({dc.name}), decode_dcs=frozenset({dc.name}),
                         same_dc=True)
            for dc in problem.datacenters
        ]
    if name == "prfaas":
        return [arch for _, variants in prfaas_groups(problem) for arch in variants]
    return [agg_architecture()]


def prfaas_groups(problem: Problem) -> list[tuple[Architecture, list[Architecture]]]:
    """``prfaas``'s variants grouped by local datacenter: (the free split there — any class prefilled
    on any P pool of the local or remote datacenters, in the mix's proportions — whose capacity ceiling
    bounds every threshold's of the group, the threshold variants, one per θ of :func:`prfaas_thresholds`)."""
    into = _lines_into(problem)
    return [(Architecture("prfaas", (P_MD,), drc=problem.options.drc, p_dcs=frozenset({dc.name, *into[dc.name]}),
                          decode_dcs=frozenset({dc.name})),
             [_prfaas_architecture(problem, dc.name, into[dc.name], theta) for theta in prfaas_thresholds(problem)])
            for dc in problem.datacenters if dc.name in into]


def prfaas_thresholds(problem: Problem) -> list[float]:
    """The thresholds θ (uncached tokens) that give different ``prfaas`` rules: each distinct
    uncached count of the classes (the classes at or above it remote), and ``inf`` (none remote)."""
    return [*sorted(set(uncached_tokens(problem))), float("inf")]


def _prfaas_architecture(problem: Problem, local: str, remote: list[str], theta: float) -> Architecture:
    """``prfaas`` with ``local`` decoding and prefilling the classes below ``theta`` uncached tokens, the
    datacenters ``remote`` prefilling the others ("set" queues; a side holding every class keeps the
    ordinary mix and light queues, a side holding none has no P pools)."""
    everyone = frozenset(range(len(problem.classes)))
    above = frozenset(k for k, u in enumerate(uncached_tokens(problem)) if u >= theta)
    below = everyone - above
    sides = [(local, below)] * bool(below) + [(dc, above) for dc in remote] * bool(above)
    return Architecture("prfaas", (P_MD,), drc=problem.options.drc, p_dcs=frozenset(dc for dc, _ in sides),
                        decode_dcs=frozenset({local}),
                        p_admits=tuple((dc, ks) for dc, ks in sides if ks != everyone))


def agg_architecture() -> Architecture:
    """The all-aggregated baseline: pipeline A only, every datacenter and chip."""
    return Architecture("agg", (P_A,), drc=False)


def prfaas_reading(problem: Problem, plan: Plan) -> dict:
    """The local datacenter and the threshold of a ``prfaas`` plan:
    ``{"local", "threshold_uncached_tokens", "threshold"}`` — the smallest uncached-token
    count (1 − h)·I of a class sent (even in part) to remote prefill, and the rule in
    words. A plan :func:`architectures` posed obeys its θ (each class wholly on one side),
    so this is the enforced θ; read from the routes, any plan can be read (an older one, or
    a PDD plan): ``threshold_uncached_tokens`` None when nothing goes remote or when the
    per-class choice is not a threshold (a class kept local has more uncached tokens than
    one sent remote, or every class is split in proportion; then ``threshold`` says which)."""
    local = sorted({p.datacenter for p in plan.pools if p.count > 0 and p.role not in ("P",)})
    where = local[0] if len(local) == 1 else (", ".join(local) or "none")
    remote: dict[str, float] = {}
    total: dict[str, float] = {}
    for r in plan.routes:
        total[r.request_class] = total.get(r.request_class, 0.0) + r.rps
        if r.src != r.dst:
            remote[r.request_class] = remote.get(r.request_class, 0.0) + r.rps
    share = {c.name: remote.get(c.name, 0.0) / total[c.name] for c in problem.classes if total.get(c.name, 0) > 0}
    uncached = {c.name: round((1 - c.hit_rate) * c.input_tokens) for c in problem.classes}
    sent = sorted((n for n, s in share.items() if s > 0.02), key=lambda n: uncached[n])
    out = {"local": where, "threshold_uncached_tokens": None}
    if not sent:
        longest = max(uncached[n] for n in share) if share else 0
        out["threshold"] = (f"no remote prefill: every prompt prefilled in {where} "
                            f"(threshold above the longest uncached prompt, {longest:,} tokens)")
        return out
    lowest = uncached[sent[0]]
    above = sorted((n for n in share if uncached[n] > lowest and share[n] < 0.98), key=lambda n: uncached[n])
    if above and max(share.values()) - min(share.values()) < 0.05:
        out["threshold"] = (f"no threshold: every class about {100 * share[sent[0]]:.0f} % prefilled remotely, in "
                            f"proportion (a P pool's queues carry the class mix)")
        return out
    if above:
        out["threshold"] = (f"not a single threshold: {above[-1]} ({uncached[above[-1]]:,} uncached tokens) is "
                            f"{100 * (1 - share[above[-1]]):.0f} % prefilled in {where} while {sent[0]} "
                            f"({lowest:,}) is {100 * share[sent[0]]:.0f} % prefilled remotely")
        return out
    split = [f"{n} {100 * share[n]:.0f} % remote" for n in sent if share[n] < 0.98]
    out["threshold_uncached_tokens"] = lowest
    out["threshold"] = (f"prompts with {lowest:,} or more uncached tokens prefilled remotely "
                        f"({len(sent)} of {len(share)} classes{'; ' + ', '.join(split) if split else ''}), "
                        f"the rest in {where}")
    return out
