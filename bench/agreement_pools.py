"""``bench_agreement.py --pools [--no-steady]``: every decode pool's design batch against what the simulator lives
(issue 42, part 1).

in:  a problem, its plan, a :class:`~placer.sim.SimConfig`
out: :func:`steady_config` (the config with a warm-up past the decode pools' fill: twice the longest time a
     plan's decoders take to forget what they hold (:func:`forget_s`: a class's stay ÷ its pool's φ, × 4 / β² where
     a line waits for its KV) — a decoder starts empty, so a run shorter than that measures an emptier KV and a
     shorter line than the plan promises — and a measured window of at least :data:`MEASURED_STAYS` of their
     longest stays: a decoder's occupancy moves on that time scale, so a shorter window sees one level of it, not
     its law; and of one relaxation time where that is longer: :data:`MEASURED_RELAXATIONS`), and
     :func:`simulate_pools` (the simulation, plus per decode pool over the measured window: mean batch and
     its variance over the mean, KV held as a share of the capacity, the share of arrivals that waited for
     KV room and their mean wait, the share of requests finished there whose own TPOT exceeds the SLA), printed by
     :func:`print_pools` beside the plan's figures: its design batch at the scenario's
     mix (the MILP's rows), at the classes the pool serves (:func:`placer.sim.engine.served_design_batch`),
     the evaluation's settled batch, KV-wait share and mean wait, and share of requests over the TPOT SLA
     (:mod:`placer.decode_state`).

One run is one window of a decoder's KV, and where the step grows with the batch the KV forgets only over its
stays ÷ φ (:func:`placer.kv_admission.kv_occupancy_variance`: a deviation relaxes at φ of the stays' rate), not
over a stay: rnd-7-17's dc-a H800 decoder (41-s stays, φ 0.21: ~190 s) read 68-85 % full over seeds 7-12 of
30,000 requests (2,865 s measured) and 1-44 % of its arrivals waiting, where the plan has 77 % and 21 % (alone
over 3,400 stays: 77.5 %, 22.1 %); the row's P90 −19.2 … +31.8 % (12 seeds pooled: −1.8 %). A ``--pools`` line is
one seed; the row pools seeds (``pooled_seeds``).

The sampler wraps the simulator's decode instances for the run (read only), as ``--breakdown`` wraps its line.
"""

from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager

from placer.evaluate import analyze
from placer.flows import decode_context_tokens, decode_fixed_share
from placer.kv_admission import held_fixed_share
from placer.kv_wait import kv_line_relaxation, kv_room_beta
from placer.pdd import PREFILL_ROLES
from placer.sim import SimConfig, simulate
from placer.sim import decode as sim_decode
from placer.sim.sources import count_lines
from placer.sim.events import decode as sim_finish

#: Warm-up in the decoders' longest relaxation times (:func:`forget_s`; the first fills them, the second lets the
#: longest outputs of a spread class arrive at their share). Two stays were not enough where the step grows with
#: the batch: rnd-7-25-mixed's B200 tp8-dep decoders (φ 0.25, β 0.88: 28 % of arrivals planned waiting for KV)
#: read 5 % waiting on a run warmed 91 s (two 45-s stays) and the row −29.7 % on three seeds; alone, the
#: simulator's decoder averaged over 16 seeds from empty read 12-24 % waiting over 45-180 s and 26-35 % over
#: 4,000 s (two seeds; the law 27.8 %), and the row over 1M requests (384 s warm) read +1.1 %; warmed two stays ÷ φ
#: (221 s), −14.6 % on 16 seeds (each 0.42-1.61 s): the line for KV forgets over 4 / β² of that; warmed two of those
#: (1,159 s), −6.6 % on 4 seeds (each 0.45-1.12 s, ±18.7 %: three stays measured are a short window of that line).
STAYS = 2.0
#: The measured window in mean stays of the longest-held class, at the least: the KV a decoder holds wanders on
#: the time scale of a stay, and its arrivals wait for room only in the stretches it runs full. rnd-7-33's plan
#: (156.6 s stays, 477 req/s): 30,000 requests measure 60 s, where its Gaudi3 decoders sat at one level each
#: (81-97 % full, var/mean of the batch 0.2-0.5 within the window) and no arrival waited — P90 -48 % off the
#: plan; over 3 stays (224,000 requests) 27 % wait for KV and P90 is +78 % (+82 % over 6).
#: Three stays still read one level of it: one of its Gaudi3 decoders alone over 150 stays made 17.2 % of arrivals wait
#: (the plan's law 17.5 %), its windows of three stays 0-50 % (a spread of ~0.18: within 0.02 takes ~250 stays).
MEASURED_STAYS = 3.0
#: …and in the decoders' relaxation times (:func:`relaxation_s`), at the least, where that is longer: a window shorter
#: than the time the line for KV takes to forget its level sees a part of one excursion, and seeds of such windows
#: are not independent samples of the slow mode, whatever their jackknife says. rnd-7-33's Gaudi3 decoders (94 %
#: full, β ≈ 1.1: 1,098 s) run quiet for stretches (seed 7: lines of 0-160 requests, 1 % of requests late) and
#: congested for others (seed 8 from 450 s to 1,950 s: lines of 100-630, 8-24 % late per 50 s); three stays
#: (470 s) read 0.61 s or 0.85 s by seed, the whole run past the fill 1.74 s on seed 8. A seed pays two relaxations
#: of warm-up whatever it measures, so a window of one relaxation costs the row less per independent sample than
#: more seeds of shorter ones (``pooled_seeds``).
MEASURED_RELAXATIONS = 1.0
#: Runs are not lengthened past this many requests (a scenario of 10-minute stays at 1,000 req/s would need 2M;
#: rnd-7-33-mixed's warm-up and measured relaxation, 1.52M, fit: ~85 s a run).
MAX_REQUESTS = 2_000_000


def forget_s(stay_s: float, fixed_share: float = 1.0, beta: float = math.inf) -> float:
    """Seconds a decoder takes to forget a deviation of what it holds, for a class held ``stay_s``: the stay ÷ φ
    (``fixed_share``; a decoder holding more steps slower and keeps each longer, so a deviation relaxes at φ of the
    stays' rate: :func:`placer.kv_admission.kv_occupancy_variance`), × the line's own relaxation where its KV binds
    (``beta``: :func:`placer.kv_wait.kv_room_beta`; :func:`placer.kv_wait.kv_line_relaxation`, 4 / β²)."""
    return stay_s / held_fixed_share(fixed_share) * kv_line_relaxation(beta)


def _stays(problem, plan, analysis) -> list[tuple[float, float]]:
    """(seconds a decode pool holds a class's request on average, :func:`forget_s` of it) over the plan's decode
    assignments: output × the step the pool settles at (:class:`placer.decode_state.DecodeState`; at most the TPOT
    SLA: an overloaded pool has no steady state to wait for)."""
    classes = {c.name: c for c in problem.classes}
    out = []
    for a in plan.assignments:
        st = analysis.decode.get(a.key)
        if a.role in PREFILL_ROLES or a.rps <= 0 or st is None or a.request_class not in classes:
            continue
        stay = classes[a.request_class].output_tokens * min(st.step_s, problem.tpot_s)
        beta = kv_room_beta(st.im.kv_capacity_tokens, st.kv_load(), st.fixed_share)
        out.append((stay, forget_s(stay, st.fixed_share, beta)))
    return out


def longest_stay_s(problem, plan, analysis) -> float:
    """Seconds the plan's decoders hold their longest-held class on average (:func:`_stays`)."""
    return max((stay for stay, _ in _stays(problem, plan, analysis)), default=0.0)


def relaxation_s(problem, plan, analysis) -> float:
    """Seconds the slowest of the plan's decoders takes to forget what it holds and the line waiting for its KV
    (:func:`forget_s`), the longest over the plan's decode assignments."""
    return max((forget for _, forget in _stays(problem, plan, analysis)), default=0.0)


def steady_config(config: SimConfig, problem, plan, rps: float) -> SimConfig:
    """``config`` lengthened by :data:`STAYS` × :func:`relaxation_s` of arrivals, all of them warm-up, and its
    measured requests to at least :data:`MEASURED_STAYS` × :func:`longest_stay_s` and :data:`MEASURED_RELAXATIONS`
    × :func:`relaxation_s` of arrivals: they start once the decoders hold what the plan promises and last long
    enough to see their occupancy's law and one excursion of their line for KV at least (at most
    :data:`MAX_REQUESTS` in all: past it the warm-up gives way, down to two stays — rnd-7-33-mixed's wants 980K,
    and 900K of its 1M left a third of a stay measured: −33.6 % on three seeds; 782K warm and three stays measured:
    −25.5 % on three seeds, ±15.6 %, where 145K warm read −22.9 % on eight, ±7.8 %). A trace replays its own
    length: only its warm-up grows, by :data:`STAYS` × :func:`longest_stay_s` (a warm-up of its decoders'
    relaxation times would eat the requests it measures: rnd-7-19-trace's, at its held hits, asked for 1M; its
    rows pool 8-32 seeds instead)."""
    analysis = analyze(problem, plan)
    stay = longest_stay_s(problem, plan, analysis)
    trace = config.workload == "trace"
    relax = relaxation_s(problem, plan, analysis)
    warm = STAYS * (stay if trace else relax) * rps
    measured = config.requests * (1.0 - config.warmup_fraction)
    wanted = max(MEASURED_STAYS * stay, MEASURED_RELAXATIONS * relax) * rps if not trace else 0.0
    if warm <= config.warmup_fraction * config.requests and measured >= wanted:
        return config
    warm = max(warm, config.warmup_fraction * config.requests)
    measured = max(measured, wanted)
    cap = max(MAX_REQUESTS, config.requests)  # what a run past it gives up is warm-up, not its measured stays
    warm = min(warm, max(cap - measured, STAYS * stay * rps))
    total = min(int(warm + measured), cap)
    return dataclasses.replace(config, requests=total, warmup_fraction=min(warm / total, 0.9))


@contextmanager
def pool_sampler(stats: dict, window: tuple[float, float]):
    """Per decode pool (by id) in ``stats``: [instance-seconds, Σ batch·dt, Σ batch²·dt, Σ KV·dt, arrivals,
    arrivals that waited, the pool, requests finished there, those whose own TPOT exceeds the SLA, the seconds
    each arrival that waited for KV room waited] over simulated times ``window``."""
    advance, join = sim_decode.DecodeInstance.advance, sim_decode.DecodeInstance.join
    admit = sim_decode.DecodeInstance._admit
    lined: dict = {}  # id(request) → when it joined a decoder's line (in the window)
    done = sim_finish.DecodeEvents.decode_done
    t0, t1 = window

    def row(inst) -> list:
        if id(inst.pool) not in stats:
            stats[id(inst.pool)] = [0.0, 0.0, 0.0, 0.0, 0, 0, inst.pool, 0, 0, []]
        return stats[id(inst.pool)]

    def sampled_done(sim, req, t, inst):
        if t0 <= t <= t1 and req.t_first is not None and req.n_out > 1:
            r = row(inst)
            r[7] += 1
            r[8] += (t - req.t_first) / (req.n_out - 1) > sim.sla_tpot
        return done(sim, req, t, inst)

    def sampled_advance(inst, t):
        dt = min(t, t1) - max(inst.t_last, t0)
        if dt > 0:
            r = row(inst)
            r[0] += dt
            r[1] += inst.B * dt
            r[2] += inst.B * inst.B * dt
            r[3] += inst.mem_used / inst.mem_cap * dt
        return advance(inst, t)

    def sampled_join(inst, req, t, tokens, pause_s=0.0):
        out = join(inst, req, t, tokens, pause_s)
        if t0 <= t <= t1:
            r = row(inst)
            r[4] += 1
            if any(w is req for w in inst.waiting):
                r[5] += 1
                lined[id(req)] = t
        return out

    def sampled_admit(inst, req, t):
        joined = lined.pop(id(req), None)
        if joined is not None:
            row(inst)[9].append(t - joined)
        return admit(inst, req, t)

    sim_decode.DecodeInstance.advance, sim_decode.DecodeInstance.join = sampled_advance, sampled_join
    sim_decode.DecodeInstance._admit = sampled_admit
    sim_finish.DecodeEvents.decode_done = sampled_done
    try:
        yield
    finally:
        sim_decode.DecodeInstance.advance, sim_decode.DecodeInstance.join = advance, join
        sim_decode.DecodeInstance._admit = admit
        sim_finish.DecodeEvents.decode_done = done


def simulate_pools(problem, plan, config: SimConfig, rps: float):
    """(the simulation, per decode pool key (role, dc, chip, tp): the sampled figures) over the measured
    window: from the warm-up's last arrival to the last arrival (the drain after it is left out; a trace replays
    at most its own lines, as the simulator does: rnd-7-19's 2,000-line trace read over 30,000 requests' span put
    its decoders at batch 2.3-2.5, a tenth of what they held)."""
    requests = config.requests
    if config.workload == "trace" and config.trace:
        requests = min(requests, count_lines(config.trace, requests))
    end = requests / rps if rps > 0 else 0.0
    stats: dict = {}
    with pool_sampler(stats, (config.warmup_fraction * end, end)):
        sim = simulate(problem, plan, config)
    out = {}
    for secs, b, b2, kv, joins, waited, pool, finished, over, waits in stats.values():
        if secs <= 0:
            continue
        mean = b / secs
        out[pool.key] = {"batch": mean, "batch_var_over_mean": (b2 / secs - mean * mean) / mean if mean > 0 else 0.0,
                         "kv_fill": kv / secs, "waited": waited / joins if joins else 0.0,
                         "waited_s": sum(waits) / len(waits) if waits else 0.0, "waits_s": waits,
                         "tpot_over": over / finished if finished else 0.0,
                         "design_served": pool.design_batch}
    return sim, out


def print_pools(problem, plan, pools: dict) -> None:
    """One line per busy decode pool: the plan's design batches and evaluation beside the simulated window."""
    analysis = analyze(problem, plan)
    designs = {p.key: p.design_batch for p in plan.pools}
    ctx = decode_context_tokens(problem.classes)
    for key, st in analysis.decode.items():
        if key.role in PREFILL_ROLES or not st.busy or key not in pools:
            continue
        s = pools[key]
        phi = decode_fixed_share(st.im, st.batch, ctx)
        print(f"     {key.role} {key.datacenter} {key.chip} tp{key.tp} x{st.count}: design {designs.get(key)} "
              f"(its classes {s['design_served']}) | plan batch {st.batch:6.1f}, var/mean {1 / max(phi, 0.02):4.2f}, "
              f"KV wait {st.kv_wait:5.1%} {st.kv_wait_s:5.2f} s | sim batch {s['batch']:6.1f} "
              f"({s['batch'] / st.batch - 1:+5.1%}), var/mean {s['batch_var_over_mean']:4.2f}, "
              f"KV {s['kv_fill']:4.0%} full, waited {s['waited']:5.1%} {s['waited_s']:5.2f} s | "
              f"TPOT over the SLA plan {_tpot_late(problem, st):5.1%}, sim {s['tpot_over']:5.1%}")


def _tpot_late(problem, st) -> float:
    """The pool's share of requests whose own TPOT exceeds the SLA (:meth:`placer.decode_state.DecodeState.
    tpot_late_share`), over its classes by their req/s (relay holds, which end before the request does, left out)."""
    rows = [(rate, c) for rate, c, hold in st.kv_items if hold is None]
    total = sum(r for r, _ in rows)
    return sum(r * st.tpot_late_share(c.output_tokens, problem.tpot_s) for r, c in rows) / total if total else 0.0


def pool_rows(problem, plan, pools: dict) -> list[tuple[str, float, float]]:
    """(label, plan batch, simulated batch) of every busy decode pool (for the summary)."""
    rows = []
    for key, st in analyze(problem, plan).decode.items():
        if key.role not in PREFILL_ROLES and st.busy and key in pools:
            rows.append((f"{key.role} {key.datacenter} {key.chip}", st.batch, pools[key]["batch"]))
    return rows
