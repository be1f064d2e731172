"""The random part of a flow's TTFT: its P queue's wait plus a WAN transfer's slowdown (and the
streaming decoder's wait for KV room).

in:  a P queue's :class:`~placer.queueing.WaitModel`; a transfer's size in seconds at the
     line's full rate, the line's utilisation and the mean residual size of its transfers
out: :class:`TtftTail` (P(wait + excess > t)), :func:`pack_extension` (a packed prompt's
     forward-mates' time), :func:`forward_mates`, :class:`SplitTail` (a flow spread over instances
     that queue differently), :class:`LengthMixTail` (a class whose prompts spread, length by length),
     :func:`ps_sojourn_var_s2` (the variance of a processor-sharing sojourn), :func:`line_batchmates`
     (transfers that leave P together), :class:`LineLoad` (how a line P instances feed slows one instance's
     transfers: :mod:`placer.line_excess`'s mean, wired per P instance by :mod:`placer.line_law`, the
     batch-mates' weight and the line's regularity) and :func:`congestion_var_factor` (the excess's variance
     on a line fed by regulated streams)

:mod:`placer.flows` re-exports these and builds them in ``Route.first_token_law``; this module
imports nothing of placer but the performance model's wait law.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from placer.queueing import WaitModel


def ps_sojourn_var_s2(size_s: float, rho: float, residual_s: float) -> float:
    """Variance (s²) of the sojourn of a transfer of ``size_s`` seconds (its bytes over the line's
    full rate) on a processor-sharing line at utilisation ``rho`` whose transfers' sizes have mean
    residual ``residual_s`` = E[S²]/(2E[S]) (seconds at full rate), Poisson arrivals (M/G/1-PS).

    Its mean is size/(1 − ρ) whatever the sizes; its spread is not. Three facts fix it:

    * a small transfer (size → 0) finishes after size·(1 + N), N the transfers it finds on the
      line, geometric (P(N ≥ n) = ρⁿ) whatever the sizes: variance ρ·size²/(1 − ρ)² (the
      "instantaneous sojourn time" of Cheung, van den Berg & Boucherie, *Insensitive bounds for
      the moments of the sojourn time distribution in the M/G/1 processor-sharing queue*,
      Queueing Systems 53, 2006);
    * a large one ends when the line has served its size plus the work that arrived meanwhile,
      compound Poisson of variance λE[S²] per second, so its variance grows linearly: a sojourn
      T = size + ρT + (that work's fluctuation) gives ρ·2r·size/(1 − ρ)³ (r = ``residual_s``;
      the exact conditional moments are Yashkov's, 1983, and Ott's, *The sojourn-time
      distribution in the M/G/1 queue with processor sharing*, J. Appl. Prob. 21, 1984);
    * for exponential sizes of mean 1/μ (r = 1/μ) the whole curve is known (Coffman, Muntz &
      Trotter 1970, *Waiting time distributions for processor-sharing systems*, JACM 17):
      2ρx/(μ(1 − ρ)³) − 2ρ(1 − e^{−μ(1−ρ)x})/(μ²(1 − ρ)⁴).

    This is that M/M/1-PS curve with 1/μ replaced by the mix's r: exact for exponential sizes,
    exact in both limits for any sizes. On the simulator's line (:class:`placer.sim.links.WanLink`,
    tests/placer/test_line_tail.py) it gives the variance of exponential sizes within a few %, and
    the P90 excess of eight-dc's size mix within 5 % for transfers from a tenth of the line's
    typical one to its largest.
    """
    if size_s <= 0.0 or rho <= 0.0:
        return 0.0
    rho = min(rho, 1.0 - 1e-6)
    if residual_s <= 0.0:  # no mix known: the small-transfer limit
        return rho * size_s * size_s / (1.0 - rho) ** 2
    a = (1.0 - rho) * size_s / residual_s
    # 2ρ r² (a − 1 + e^{−a}) / (1 − ρ)⁴, written to stay exact for small a
    shape = a - 1.0 + math.exp(-a) if a > 1e-3 else a * a / 2 - a ** 3 / 6 + a ** 4 / 24
    return 2.0 * rho * residual_s * residual_s * shape / (1.0 - rho) ** 4


@dataclass(frozen=True)
class LineLoad:
    """How the plan's line slows one P instance's transfers of one class
    (:func:`placer.line_law.line_stream_utilizations`, what :meth:`placer.flows.Route.first_token_law` takes as
    its ``utilization``; a bare float is a Poisson line's utilisation).

    * ``utilization``: the M/G/1-PS line on Poisson arrivals that slows them as much on average (the count a
      transfer meets, x = u/(1 − u) per second of its size);
    * ``mate_weight``: E[min(b, b′)]/b over its batch-mates' sizes b′ (the other prompts of its packed forward
      crossing the line): under processor sharing two transfers that start together get equal shares until the
      smaller ends, so a mate delays it by the smaller of the two, not by its own b;
    * ``dispersion``: R, the variance of the work the line's streams bring per second over a Poisson line's of
      the same sizes (:func:`placer.line_excess.work_dispersion`; 1: Poisson, below: regulated streams) — what
      :func:`congestion_var_factor` scales the excess's variance by."""

    utilization: float
    mate_weight: float = 1.0
    dispersion: float = 1.0

    def __float__(self) -> float:
        return float(self.utilization)


def congestion_var_factor(rho: float, dispersion: float) -> float:
    """The factor on the M/G/1-PS excess variance (:func:`ps_sojourn_var_s2`) where the line's streams bring
    their work ``dispersion`` (R) times as variably as Poisson arrivals.

    A small transfer's excess is its size times the count N it finds. On a Poisson line N is geometric: Poisson
    given the line's congestion, whose level is exponential, so Var N = L + L² (L = ρ/(1 − ρ); each stream's
    count Poisson given it, two streams' counts covarying by L_i·L_j). The congestion is the line's work
    fluctuating: with regulated streams its variance is R times as large (the work arriving per second, as
    Kingman's scaling of the waiting work takes it), the count given it stays Poisson: Var N = L + R·L², the
    factor (1 + R·L)/(1 + L) — 1 on a Poisson line, R for a heavily loaded one. On the simulator's line fed by
    the flagship's P instances (tests/placer/test_line_tail.py: R 0.56, L 2.6) the count's variance is 6.06
    where this gives 6.33 and the geometric law 9.2 (the streams' measured covariances put the congestion's
    variance at 0.57–0.78 L²). A large transfer's variance is the work arriving in its stay's, R times
    Poisson's: this factor is at or above it there."""
    if rho <= 0.0 or dispersion >= 1.0:
        return 1.0
    count = min(rho, 1.0 - 1e-6) / (1.0 - min(rho, 1.0 - 1e-6))
    return (1.0 + max(dispersion, 0.0) * count) / (1.0 + count)


def _hypo_exceeds(wait: WaitModel, t: float, theta2: float) -> float:
    """P(W + X > t), W the queue's wait (P(W > s) = ρ_w e^{−s/θ₁}, or its whole M/G/1 law where
    the queue's service points are known), X ~ Exp(θ₂) independent."""
    if t < 0.0:
        return 1.0
    rho = wait.rho
    if rho >= 1.0:
        return 1.0
    e2 = math.exp(-t / theta2)
    if rho <= 0.0:
        return e2
    whole = wait.prob_exceeds_plus_exp(t, theta2)
    if whole is not None:  # the whole M/G/1 (or time-scaled G/G/1) law, convolved with X numerically
        return whole
    theta1 = wait.mean_wait_s / rho
    if abs(theta1 - theta2) <= 1e-9 * max(theta1, theta2):
        both = (1.0 + t / theta2) * e2
    else:
        both = (theta1 * math.exp(-t / theta1) - theta2 * e2) / (theta1 - theta2)
    return (1.0 - rho) * e2 + rho * both


@dataclass(frozen=True)
class TtftTail:
    """The random part of a flow's TTFT: its P queue's wait W plus E, independent of W: when the
    first token's KV crosses a WAN line, the transfer's excess over its unloaded time, and for a
    packed prompt the time its forward-mates add (:func:`pack_extension`).

    The line's part has mean ``wan_excess_mean_s`` and variance ``wan_excess_var_s2`` (None: the
    mean squared, an exponential excess); the pack's, ``pack_mean_s`` and ``pack_var_s2``; E's
    mean and variance are their sums. Its law is the two-moment fit that keeps P(W + E > t) closed-form,
    with c² = var/mean²:

    * c² ≥ 1 (small transfers: most find the line idle): E = 0 with probability 1 − p, else
      Exp(θ), p = 2/(1 + c²), θ = mean·(1 + c²)/2;
    * c² < 1 (transfers long beside the line's others: the sojourn concentrates about its
      mean): E = d + Exp(θ), θ = mean·c, d = mean·(1 − c).

    With P(W > t) = ρ_w·e^{−t/θ₁} and X ~ Exp(θ₂):
    P(W + X > t) = (1 − ρ_w)·e^{−t/θ₂} + ρ_w·(θ₁e^{−t/θ₁} − θ₂e^{−t/θ₂})/(θ₁ − θ₂)
    (the hypoexponential tail; (1 + t/θ)e^{−t/θ} when θ₁ = θ₂), shifted by d and mixed with
    P(W > t) by p.
    """

    wait: WaitModel
    wan_excess_mean_s: float = 0.0
    wan_excess_var_s2: float | None = None
    pack_mean_s: float = 0.0
    """Mean seconds the prompt's packed forward runs past its own prefill (:func:`pack_extension`)."""
    pack_var_s2: float = 0.0
    spread_mean_s: float = 0.0
    """Mean seconds a request's own length adds beyond its band's shortest (:class:`LengthMixTail`'s bands)."""
    spread_var_s2: float = 0.0
    kv_wait_share: float = 0.0
    """Share of the flow's requests the decoder that streams t0 makes wait for KV room
    (:func:`placer.kv_wait.kv_wait_law`, the line included): the first token waits with them."""
    kv_wait_mean_s: float = 0.0
    """Mean seconds those wait (taken exponential: mean p·m, variance p·m²·(2 − p))."""

    def without_line(self) -> TtftTail:
        """The same queue (and pack, and KV wait) without the line's excess."""
        return TtftTail(self.wait, pack_mean_s=self.pack_mean_s, pack_var_s2=self.pack_var_s2,
                        spread_mean_s=self.spread_mean_s, spread_var_s2=self.spread_var_s2,
                        kv_wait_share=self.kv_wait_share, kv_wait_mean_s=self.kv_wait_mean_s)

    def with_kv_wait(self, share: float, mean_s: float) -> TtftTail:
        """The same tail with the streaming decoder's KV wait added."""
        return dataclasses.replace(self, kv_wait_share=share, kv_wait_mean_s=mean_s)

    def prob_exceeds(self, t: float) -> float:
        """P(W + E > t), E the line's excess plus the pack's extension (independent: means and
        variances add)."""
        line = max(self.wan_excess_mean_s, 0.0)
        line_var = 0.0
        if line > 0.0:
            line_var = line * line if self.wan_excess_var_s2 is None else max(self.wan_excess_var_s2, 0.0)
        mean = line + max(self.pack_mean_s, 0.0) + max(self.spread_mean_s, 0.0)
        var = line_var + max(self.pack_var_s2, 0.0) + max(self.spread_var_s2, 0.0)
        p, kv = min(max(self.kv_wait_share, 0.0), 1.0), max(self.kv_wait_mean_s, 0.0)
        if p > 0.0 and kv > 0.0:
            mean += p * kv
            var += p * kv * kv * (2.0 - p)
        if mean <= 0.0 or t < 0.0:
            return self.wait.prob_exceeds(t)
        scv = var / (mean * mean)
        if scv >= 1.0:
            p = 2.0 / (1.0 + scv)
            return (1.0 - p) * self.wait.prob_exceeds(t) + p * _hypo_exceeds(self.wait, t, mean * (1.0 + scv) / 2)
        c = math.sqrt(scv)
        shift = mean * (1.0 - c)
        if t < shift:
            return 1.0
        if c <= 1e-9:
            return self.wait.prob_exceeds(t - shift)
        return _hypo_exceeds(self.wait, t - shift, mean * c)


@dataclass(frozen=True)
class SplitTail:
    """The random part of a flow's TTFT when its requests go to P instances that queue differently:
    ``parts`` = ((weight, tail) ...), the share of the flow's requests at each instance (weights sum
    to 1) and that instance's :class:`TtftTail`. P(W + E > t) is the weighted sum — the law of total
    probability over where a request is queued."""

    parts: tuple[tuple[float, TtftTail], ...]

    def prob_exceeds(self, t: float) -> float:
        """P(W + E > t) over the instances."""
        return sum(w * tail.prob_exceeds(t) for w, tail in self.parts)

    @property
    def wan_excess_mean_s(self) -> float:
        """The line excess's mean over the instances."""
        return sum(w * tail.wan_excess_mean_s for w, tail in self.parts)

    def without_line(self) -> SplitTail:
        """The same queues (and packs, and KV waits) without the line's excess."""
        return SplitTail(tuple((w, tail.without_line()) for w, tail in self.parts))

    def with_kv_wait(self, share: float, mean_s: float) -> SplitTail:
        """Every instance's tail with the streaming decoder's KV wait added."""
        return SplitTail(tuple((w, tail.with_kv_wait(share, mean_s)) for w, tail in self.parts))


@dataclass(frozen=True)
class LengthMixTail:
    """The random part of a flow's TTFT when its class's prompts spread (``Class.new_tokens_cv2``): a
    request of the class has a length of its lognormal law (the law the simulator and the load generator
    draw), and its own prefill, KV move and tail are that length's. The law is cut into bands of
    probability (:func:`placer.queue_laws.first_token_by_length`); ``parts`` = ((probability, shift s,
    tail) ...) per band: the shift is the band's shortest length's deterministic TTFT less the flow's
    (priced at the class's mean length), and the tail carries the rest of the band's spread as an
    independent excess (``TtftTail.spread_mean_s``/``spread_var_s2``). First come, first served, a
    request's own size does not change the wait it meets — but where short prompts pack, the room it needs
    does (:meth:`placer.packed_queue.PackedWait.for_tokens`: each band meets its own length's wait);
    P(TTFT − det > t) = Σ p · P(shift + tail > t). Without it a class's P50 and P90 sit at its mean
    length's TTFT, where its requests spread around it (on the serving bench a conversation's turns grow
    turn by turn: the class's 10th percentile, not its mean, is the trace's TTFT P50)."""

    parts: tuple[tuple[float, float, object], ...]

    def prob_exceeds(self, t: float) -> float:
        """P(shift + tail > t) over the lengths."""
        return sum(p * tail.prob_exceeds(t - shift) for p, shift, tail in self.parts)

    @property
    def wan_excess_mean_s(self) -> float:
        """The line excess's mean over the lengths."""
        return sum(p * tail.wan_excess_mean_s for p, _, tail in self.parts)

    def without_line(self) -> LengthMixTail:
        """The same lengths and queues without the line's excess."""
        return LengthMixTail(tuple((p, shift, tail.without_line()) for p, shift, tail in self.parts))

    def with_kv_wait(self, share: float, mean_s: float) -> LengthMixTail:
        """Every length's tail with the streaming decoder's KV wait added."""
        return LengthMixTail(tuple((p, shift, tail.with_kv_wait(share, mean_s)) for p, shift, tail in self.parts))


def forward_mates(wait: WaitModel) -> float:
    """Expected other prompts in the forward that prefills a short prompt (one shorter than a chunk).

    P packs the short prompts queued behind each other into one forward
    (:func:`placer.p_queues.packed_wait_law`). With r the probability that a request rides along in a
    queued forward (``wait.ride``), a forward holds K requests, geometric from 1
    (P(K = k) = (1 − r)·r^(k−1)); a request sits in a forward size-biased, so it has
    E[K²]/E[K] − 1 = 2r/(1 − r) forward-mates, none with probability (1 − r)². Without packing
    (r = 0) there are none."""
    r = min(max(wait.ride, 0.0), 0.95)
    return 2.0 * r / (1.0 - r)


def pack_extension(wait: WaitModel) -> tuple[float, float]:
    """(mean s, variance s²) of how long a short prompt's forward runs past its own prefill.

    Every prompt of a packed forward finishes when the forward does, so a short prompt's
    prefill lasts its own time plus what its forward-mates add (:func:`forward_mates`, each
    ``wait.mate_cost_s`` on average: its prefill alone less the weight read the forward
    shares). The wait law prices each prompt alone; this is the rest. It is 0 with probability
    (1 − r)² (no mates) — taken exponential otherwise, so with p = 1 − (1 − r)² its squared
    coefficient of variation is 2/p − 1 (the two-moment form :class:`TtftTail` fits). A length's own law
    at a packed queue (:class:`placer.packed_queue.ClassWait`) already runs to its forward's end: none."""
    if getattr(wait, "mates_in_wait", False):  # one length's law at a packed queue holds its mates
        return 0.0, 0.0
    mean = forward_mates(wait) * max(wait.mate_cost_s, 0.0)
    if mean <= 0.0:
        return 0.0, 0.0
    r = min(max(wait.ride, 0.0), 0.95)
    p = 1.0 - (1.0 - r) ** 2
    return mean, mean * mean * (2.0 / p - 1.0)


def line_batchmates(wait: WaitModel, line_share: float) -> float:
    """Expected other KV transfers that start over the same line at the same moment as a short
    prompt's (a prompt of at least a chunk runs its own forwards: it has none).

    Every packed request's KV leaves when its forward ends, so transfers reach the line in
    batches, not one by one as Poisson arrivals would: of the prompt's :func:`forward_mates`,
    ``line_share`` (the share of the queue's requests whose KV crosses this line) go the same
    way. Without packing (r = 0: the MILP's unpacked queue law, or long prompts) there are none."""
    return forward_mates(wait) * min(max(line_share, 0.0), 1.0)
