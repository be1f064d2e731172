"""The packed P queue class by class: who rides a queued forward, what it skips, and the P side each
prompt length meets (issue 42; :func:`placer.p_queues.packed_wait_law` builds on it).

in:  a P queue's items — (req/s, prefill seconds alone, new tokens[, prompt tokens]) per class or
     length point — its instances and the instance's model (:class:`~placer.perfmodel.InstanceModel`)
out: :func:`packed_queue` → :class:`PackedState` (utilisation, each item's ride chance, wait and P side,
     the jumps of the queue's work); :func:`packed_law` → :class:`PackedWait`, the queue's law with
     :meth:`PackedWait.for_tokens`, the :class:`ClassWait` one prompt length meets

The physics (the simulator's P, :mod:`placer.sim.prefill`): a free P instance takes the FCFS prefix of
its queue whose new tokens fit in one chunk C into one forward (a prompt of C or more runs its chunks
alone). So the queue is a line of *forwards in formation*; an arrival that finds the last of them with
room for its own n tokens *rides* it, else it opens a new one (or starts at once on an idle instance).

* **The work V** an arrival finds (the time the instance needs to empty without further arrivals) jumps
  by J at each arrival: the prompt's prefill alone S_k when it opens a forward, its marginal m_k (the
  forward with it less without it, on the roofline: compute-bound packs share only the fixed overhead,
  memory-bound ones the weight read too) when it rides — beside the heads it has room behind, averaged over
  them (a forward's time is a max: behind a memory-bound head a rider costs little, behind a compute-bound one
  its FLOPs), so a long prompt, which rides only behind short memory-bound heads, saves their weight read. Rides happen only
  behind a queue, so J is smaller exactly when V is large. Rate conservation of V² (Poisson arrivals see time averages):
  E[V](1 − ρ_raw) = λE[J²]/2 − λΣ_k f_k s_k r_k E[V | ride], s_k = S_k − m_k, r_k class k's ride
  chance, ρ_raw = λE[S]; with E[V | ride] = E[R | Lq ≥ 1] + (E[V] − ρE[R])/q (the queued work all lies
  where the queue is non-empty, q = P(Lq ≥ 1)) it is linear in E[V]. Without rides it is P–K.
* **Who rides**: r_k = q·P(room for n_k). The last forward's head h is one that opened a queued forward
  (rate f_h(ρ − r_h)), its riders so far geometric with the forward's mean count; room needs
  n_h + n_k + their tokens ≤ C, riders longer than the gap barred. A long prompt rides only behind
  heads and riders short enough; a tiny one rides most queued forwards, long ones included. Its wait
  until its forward starts is W_k = E[V] − r_k·E[D_last]: a rider skips the members ahead of it.
* **Its P side**: a rider finishes with the forward it joined, so the skip returns: the P side past its
  own prefill is V − r_k·s_k plus the marginals of the prompts that fit beside it and ride after it
  (geometric, continuation the share of arrivals doing so). Its law (:class:`ClassWait`) is V's — the
  queue's M/G/1 law of the jumps — stretched to that mean: those joiners gather while it waits.

q is the geometric queue's ρ·m/(1 + m), m = E[Lq]/ρ; E[R] the residual of a forward (heads' prefill
plus their riders' marginals, riders' count geometric); the fixed point (r, W) is iterated, damped.
On the simulator's P (tests/placer/test_wait_tail.py) each class's P-side P90 is within 10 % on
all-short, chunked and three-class mixes and +15 % on rnd-7-30's (the mean-saving M/G/1 law: +33 %).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from placer.queueing import WaitModel

#: Damped fixed-point iterations of :func:`packed_queue` (stops earlier once settled).
ITERATIONS = 200
#: Convergence of the fixed point (seconds and probabilities).
TOLERANCE = 1e-7
#: A rider's marginal is averaged over at most this many bands of the heads' lengths (:func:`_marginals`).
HEAD_BINS = 8
#: Settled queues :func:`packed_queue` keeps per instance model.
MEMO_ENTRIES = 1024


@dataclass(frozen=True)
class ClassWait(WaitModel):
    """The random part of one prompt length's P side at a packed queue — from its arrival to the end of
    the forward it runs in, less its prefill alone. Its mean is E[V] − r_k·s_k + the marginals of the
    prompts that join its forward after it (a rider starts early but finishes with the members ahead of
    it, so the skip returns); its law is the queue's work V's law (its jumps as service points, at its
    utilisation, the queue's G/G/1 factor) stretched in time by ``wait_scale`` to that mean — the joiners
    gather while it waits, so they grow with the wait. Its forward-mates are in it:
    :func:`placer.ttft_tail.pack_extension` adds none (``mates_in_wait``); ``ride`` stays the share of
    arrivals that ride beside it (the line's batch-mates, :func:`placer.ttft_tail.line_batchmates`)."""

    wait_scale: float = 1.0
    mates_in_wait: bool = True

    @property
    def time_scale(self) -> float:
        """The queue's time scale (its G/G/1 factor) times this length's stretch."""
        return WaitModel.time_scale.fget(self) * self.wait_scale


@dataclass(frozen=True)
class PackedWait(WaitModel):
    """A packed P queue's law (its moments are the queue's work, the planning rule's check) with each
    length's own: ``by_tokens`` = ((new tokens, :class:`ClassWait`), ...) sorted by tokens."""

    by_tokens: tuple[tuple[float, ClassWait], ...] = ()

    def for_tokens(self, new_tokens: float) -> WaitModel:
        """The law a prompt of ``new_tokens`` meets: the nearest item's by tokens (its room decides whether
        it rides; the items are the classes' length points), the queue's law without items."""
        table = self.by_tokens
        if not table:
            return self
        return min(table, key=lambda row: abs(row[0] - new_tokens))[1]


@dataclass(frozen=True)
class PackedState:
    """The settled packed queue (per item, in the items' order): ``rho`` (busy share), ``ride`` (r_k),
    ``wait_s`` (W_k: until its forward starts), ``side_s`` (the mean random part of its P side:
    :class:`ClassWait`), ``mates_ride`` (the share of arrivals riding beside it), ``jumps``
    ((probability, seconds): the work each arrival adds), ``mean_marginal_s`` (a rider's mean marginal),
    ``work_s`` (E[V])."""

    rho: float
    ride: tuple[float, ...]
    wait_s: tuple[float, ...]
    side_s: tuple[float, ...]
    mates_ride: tuple[float, ...]
    jumps: tuple[tuple[float, float], ...]
    mean_marginal_s: float
    work_s: float


def _parts(im, item) -> tuple[float, float] | None:
    """(FLOPs, bytes besides the weights) of a short item's one forward, or None where the model has no
    roofline parts (the legacy saving is used)."""
    parts = getattr(im, "prefill_chunk_parts", None)
    if parts is None:
        return None
    new = max(1, round(item[2]))
    n_in = max(new, round(item[3])) if len(item) > 3 else new
    return parts(n_in, n_in - new, new)


def _marginals(im, S, n, short, parts, head_w, rider_w, riders) -> np.ndarray:
    """Each item's marginal seconds in the forward it would ride: the last forward it rides (heads by
    its own row of ``head_w`` [k, h]: those it has room behind, ``riders`` riders of the mix ``rider_w``)
    with it, less without it, on the roofline, scaled by the item's measured ÷ roofline time alone (the
    simulator's pack rule), averaged over the heads in at most :data:`HEAD_BINS` bands of their lengths. A long
    prompt rides only behind short heads: beside a memory-bound head it saves the whole weight read, not the
    fixed overhead a compute-bound head would leave it. Priced beside the heads' mean instead, a 1.5K-token rider
    behind tiny and 3K-token heads (qwen3-235b-a22b on B200 tp4) saved 18 % too little of the work it does."""
    w = im.weight_bytes
    flops = np.array([p[0] if p else 0.0 for p in parts])
    mem = np.array([p[1] if p else 0.0 for p in parts])
    sh = short.astype(float)
    rider_f, rider_m, rider_t = riders * (rider_w @ flops), riders * (rider_w @ mem), riders * (rider_w @ n)
    # each head's forward so far (its riders at their mean): a forward's time is a max of compute and memory
    # (and, on MoE, the overlapped all-to-all), so a rider's marginal is averaged over the heads it rides behind,
    # never priced beside the mean head — behind a memory-bound head it costs little, behind a compute-bound one
    # its FLOPs (Jensen: the mean head of a mix of both is compute-bound too often)
    heads = np.flatnonzero(short)
    bins = np.array_split(heads[np.argsort(n[heads], kind="stable")], min(len(heads), HEAD_BINS))
    out = S.copy()
    done: dict[tuple, float] = {}  # items of one prompt (a class on several rows) ride alike
    for k in heads:
        key = (n[k], flops[k], mem[k], S[k])
        if key in done:
            out[k] = done[key]
            continue
        hw = head_w[k] * sh
        hw = hw / hw.sum() if hw.sum() > 0 else sh / max(sh.sum(), 1.0)
        alone = im.forward_s(flops[k], w + mem[k], n[k])
        scale = S[k] / alone if alone > 0 else 1.0
        added = 0.0
        for b in bins:  # heads of nearby lengths (one regime) at their mean, each band at its own forward
            wb = hw[b].sum()
            if wb <= 0:
                continue
            f, m_, t = (hw[b] @ flops[b]) / wb + rider_f, (hw[b] @ mem[b]) / wb + rider_m, (hw[b] @ n[b]) / wb + rider_t
            added += wb * (im.forward_s(f + flops[k], w + m_ + mem[k], t + n[k]) - im.forward_s(f, w + m_, t))
        out[k] = done[key] = min(S[k], max(0.0, added) * scale)
    return out


def _room(n, S, m, short, qh, gap, rider_w, cont, order) -> tuple[np.ndarray, np.ndarray]:
    """[k, h]: the chance that a forward in formation headed by h still has room for k, and its time so
    far given it has. Its riders so far are geometric (P(one more) = ``cont``), each of the rider mix
    ``rider_w``; room needs each of them at most the gap C − n_h − n_k and their tokens (each at the mean
    of those) within it: Σ_{j ≤ jmax} (1 − cont)(cont·p_small)^j, jmax = gap ÷ their mean tokens."""
    ns = n[order]
    cw = np.concatenate(([0.0], np.cumsum(rider_w[order])))
    cn = np.concatenate(([0.0], np.cumsum(rider_w[order] * ns)))
    cm = np.concatenate(([0.0], np.cumsum(rider_w[order] * m[order])))
    ok = (gap >= 0) & short[:, None] & (short & (qh > 0))[None, :]
    idx = np.searchsorted(ns, np.where(ok, gap, -1.0), side="right")
    ps = cw[idx]
    safe = np.where(ps > 0, ps, 1.0)
    n_small = cn[idx] / safe
    m_small = cm[idx] / safe
    jmax = np.where(n_small > 0, np.floor(np.minimum(gap / np.where(n_small > 0, n_small, 1.0), 1e6)), 1e6)
    x = cont * ps
    room = np.where(ps > 0, (1.0 - cont) * (1.0 - x ** (jmax + 1.0)) / (1.0 - x), 1.0 - cont)
    dlast = S[None, :] + np.where(ps > 0, x / (1.0 - x) * m_small, 0.0)
    return np.where(ok, room, 0.0), np.where(ok, dlast, 0.0)


def _fit_after(n, C, fits, head_w, ride) -> np.ndarray:
    """[k, j]: the chance that a prompt j still fits in k's forward after k — beside k alone when k opened
    it (1 − r_k), beside k and its head h when k rode (r_k; heads weighted by ``head_w[k, h]``)."""
    total = head_w.sum(axis=1)
    w = np.where(total[:, None] > 0, head_w / np.where(total > 0, total, 1.0)[:, None], 0.0)
    beside = (n[None, :, None] + n[:, None, None] + n[None, None, :] <= C)  # [k, j, h]
    behind_head = np.einsum("kjh,kh->kj", beside.astype(float), w)
    return fits * ((1.0 - ride)[:, None] + ride[:, None] * behind_head)


def packed_queue(items: list[tuple], instances: float, im) -> PackedState | None:
    """The settled packed queue of ``items`` on one of ``instances`` instances (arrivals split evenly);
    None when it is overloaded (its work exceeds the instance).

    Kept on ``im`` (at most :data:`MEMO_ENTRIES` queues), as the model keeps its prefill times: a plan's
    figures ask each queue's law twice (each queue alone and laid on its instances: the same mix where a pool
    is one queue), its check and its "why" again — on a 400-pool plan the fixed points took ~4 s a time."""
    memo = im.__dict__.setdefault("_packed_states", {})  # as functools.cached_property keeps its value
    key = (tuple(map(tuple, items)), float(instances))
    if key in memo:
        return memo[key]
    state = _settle(items, instances, im)
    if len(memo) < MEMO_ENTRIES:
        memo[key] = state
    return state


def _settle(items: list[tuple], instances: float, im) -> PackedState | None:
    """:func:`packed_queue`, worked out."""
    lam = sum(it[0] for it in items) / instances
    f = np.array([it[0] for it in items]) / sum(it[0] for it in items)
    S = np.array([float(it[1]) for it in items])
    n = np.array([float(it[2]) for it in items])
    C = im.prefill_chunk_tokens
    short = n < C
    parts = [_parts(im, it) if sh else None for it, sh in zip(items, short)]
    legacy = any(p is None for p, sh in zip(parts, short) if sh)
    s0 = im.forward_s(0.0, im.weight_bytes, 1.0)
    m = np.where(short, S - np.minimum(s0, 0.9 * S), S)
    rho_raw = lam * float(f @ S)
    gap = C - n[:, None] - n[None, :]  # [k, h]: room left beside head h for k
    fits = (n[:, None] + n[None, :] <= C) & short[:, None] & short[None, :]
    order = np.argsort(n, kind="stable")
    r = np.zeros(len(items))
    W = np.zeros(len(items))
    ev, q, rho = 0.0, 0.0, rho_raw
    room = np.zeros((len(items), len(items)))
    qh = np.zeros(len(items))
    for _ in range(ITERATIONS):
        rbar = float(f @ r)
        a = rbar / (1.0 - rbar)  # riders per forward (geometric)
        heads = f * (1.0 - r)
        g = heads / heads.sum()
        rider_w = f * r / rbar if rbar > 0 else f
        if not legacy and any(short):
            # each item against the heads it has room behind (the last iteration's), else the queued heads
            behind = room * qh[None, :]
            opened = np.broadcast_to(f * np.maximum(rho - r, 0.0), room.shape)
            m = _marginals(im, S, n, short, parts, np.where(behind.sum(axis=1)[:, None] > 0, behind, opened),
                           rider_w, a)
        save = S - m
        rho = rho_raw - lam * float(f @ (save * r))
        if rho >= 1.0:
            return None
        mr = float(rider_w @ m)
        mr2 = float(rider_w @ (m * m))
        # a forward: its head's prefill plus its riders' marginals (count geometric, mean a)
        d_pts = S + np.where(short, a * mr, 0.0)
        ed = float(g @ S) + a * mr
        vd = float(g @ (S * S)) - float(g @ S) ** 2 + a * (mr2 - mr * mr) + a * (1.0 + a) * mr * mr
        er = (vd + ed * ed) / (2.0 * ed)
        ej2 = float(f @ ((1.0 - r) * S * S + r * m * m))
        sigma = rho_raw - rho
        lq = lam * float(f @ W)
        mm = lq / rho if rho > 0 else 0.0
        q = rho * mm / (1.0 + mm)
        if q > 1e-12 and rho > 0:
            # the forward in service given a queue behind it: long forwards gather queues
            beta = 1.0 - float(g @ (1.0 - np.exp(-lam * d_pts))) / (lam * ed)
            u = min(max((q / rho - beta) / (1.0 - beta), 0.0), 1.0) if beta < 1.0 else 1.0
            rtail = float(g @ (d_pts * d_pts / 2 - d_pts / lam + (1.0 - np.exp(-lam * d_pts)) / lam ** 2)) / ed
            erq = rho * (u * er + (1.0 - u) * rtail) / q
            ev = (lam * ej2 / 2.0 - sigma * (erq - rho * er / q)) / (1.0 - rho + sigma * (1.0 / q - 1.0))
        else:
            ev = lam * ej2 / (2.0 * (1.0 - rho))
        # the last forward in formation: heads that opened a queued forward, riders so far geometric
        qh = f * np.maximum(rho - r, 0.0)
        qh = qh / qh.sum() if qh.sum() > 0 else qh
        cont = a / (1.0 + a)
        room, dlast_h = _room(n, S, m, short, qh, gap, rider_w, cont, order)
        tot = room @ qh
        new_r = q * tot
        dlast = np.where(tot > 0, (room * dlast_h) @ qh / np.where(tot > 0, tot, 1.0), 0.0)
        new_w = np.maximum(ev - new_r * dlast, 0.0)
        diff = float(np.max(np.abs(new_r - r))) + float(np.max(np.abs(new_w - W)))
        r = 0.5 * (r + new_r)
        W = 0.5 * (W + new_w)
        if diff < TOLERANCE:
            break
    # the prompts that fit beside it and ride after it (continuation: the share of arrivals doing so)
    # — beside it and what is ahead of it: as a rider, the head of the forward it joined (heads by
    # their room for it), as a head, nothing
    fit = _fit_after(n, C, fits, room * qh[None, :], r)
    mates_r = np.minimum(fit @ (f * r), 0.95)
    mates_m = np.where(mates_r > 0, (fit @ (f * r * m)) / np.where(mates_r > 0, mates_r, 1.0), 0.0)
    # its P side past its own prefill: the work V it finds, less its saving when it rides (a rider skips
    # the forward it joins in the queue but finishes with it), plus the prompts that ride after it
    side = np.maximum(ev + mates_r / (1.0 - mates_r) * mates_m - r * (S - m), 0.0)
    jumps = tuple((float(p), float(t)) for p, t in zip(np.concatenate((f * (1.0 - r), f * r)), np.concatenate((S, m)))
                  if p > 0)
    rbar = float(f @ r)
    mean_m = float((f * r) @ m) / rbar if rbar > 0 else 0.0
    return PackedState(rho, tuple(map(float, r)), tuple(map(float, W)), tuple(map(float, side)),
                       tuple(map(float, mates_r)), jumps, mean_m, ev)


def packed_law(items: list[tuple], instances: float, im, arrival_cv2: float = 1.0) -> WaitModel:
    """The packed queue's :class:`PackedWait` (its work's M/G/1 law: the jumps as service points), each
    item's :class:`ClassWait` the same law stretched to its own P side's mean; a plain overloaded law
    where the queue cannot keep up."""
    lam_total = sum(it[0] for it in items)
    frac = [it[0] / lam_total for it in items]
    overloaded = WaitModel(1.0, sum(p * it[1] for p, it in zip(frac, items)),
                           sum(p * it[1] ** 2 for p, it in zip(frac, items)))
    if instances <= 0:
        return overloaded
    state = packed_queue(items, instances, im)
    if state is None:
        return overloaded
    mean = sum(p * t for p, t in state.jumps)
    second = sum(p * t * t for p, t in state.jumps)
    rbar = sum(p * r for p, r in zip(frac, state.ride))
    base = WaitModel(state.rho, mean, second, ride=rbar, mate_cost_s=state.mean_marginal_s, service=state.jumps,
                     arrival_cv2=arrival_cv2)
    # each length: the base law (its mean at Poisson arrivals, ``poisson``) stretched to its P side's mean
    poisson = state.rho * second / (2.0 * mean * (1.0 - state.rho)) if state.rho > 0 else 0.0
    fields = {fl.name: getattr(base, fl.name) for fl in dataclasses.fields(WaitModel)}
    table = []
    for k, it in enumerate(items):
        own = {**fields, "ride": state.mates_ride[k]}
        stretch = state.side_s[k] / poisson if poisson > 0 else 1.0
        table.append((float(it[2]), ClassWait(**own, wait_scale=stretch)))
    table.sort(key=lambda row: row[0])
    dedup: dict[float, ClassWait] = {}
    for tokens, law in table:  # one law per length (the first item's of equal lengths: the same physics)
        dedup.setdefault(tokens, law)
    return PackedWait(**fields, by_tokens=tuple(dedup.items()))
