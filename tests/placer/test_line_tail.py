"""The WAN line's TTFT tail (placer.ttft_tail) against the simulator's own line.

A micro-experiment on :class:`placer.sim.links.WanLink` (processor sharing): Poisson arrivals of
KV transfers in the size mix of eight-dc's eu-north→eu-central line (65K-token prompts, the
decode-side cache trimming each class to its uncached part), at a light and a heavy utilisation.
Every arrival is a tagged transfer; its excess over the unloaded time is compared, per size,
with the law :meth:`placer.flows.Route.first_token_law` builds: mean size·ρ/(1 − ρ), variance
:func:`placer.ttft_tail.ps_sojourn_var_s2`, two-moment shape :class:`placer.ttft_tail.TtftTail`.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import itertools
import random
from types import SimpleNamespace

import pytest

from placer.p_queues import mixture_quantile
from placer.queueing import WaitModel
from placer.line_law import departure_cv2
from placer.sim.links import WanLink
from placer.line_excess import Departures, LineStream, departures_of, line_excess_at, line_excess_factors, work_dispersion
from placer.ttft_tail import TtftTail, congestion_var_factor, ps_sojourn_var_s2

LINE_BYTES_PER_S = 5e9  # 40 Gbit/s
#: (bytes, share) of eight-dc's line: 65536-token prompts at the classes' hit rates, fp8 KV.
MIX = [(2.678e9, 0.035), (1.418e9, 0.06), (0.236e9, 0.155), (0.126e9, 0.15), (0.079e9, 0.12),
       (0.047e9, 0.15), (0.024e9, 0.13), (0.006e9, 0.2)]
SMALL, LARGE, TINY = 2, 0, 7  # 47 ms, 0.54 s and 1.2 ms on the line; its mean residual transfer is 0.35 s
TRANSFERS = 60_000


class _Engine:
    """What WanLink needs of the simulator: an event heap and the landing callback."""

    runtime = None

    def __init__(self):
        self.heap, self.seq, self.landed = [], itertools.count(), {}

    def kv_landed(self, req, t: float) -> None:
        self.landed[req.rid] = t


class _Series:
    def add_span(self, t0: float, t1: float, rate: float) -> None:
        pass


@functools.lru_cache(maxsize=None)
def _excess_by_size(rho: float, seed: int = 3) -> dict[int, list[float]]:
    """Seconds each transfer took beyond its unloaded time, by size class (the first tenth dropped)."""
    rng = random.Random(seed)
    eng = _Engine()
    line = WanLink(eng, "a", "b", LINE_BYTES_PER_S, 0.0, 0.0, _Series(), rng)
    mean_bytes = sum(b * s for b, s in MIX)
    rate = rho * LINE_BYTES_PER_S / mean_bytes
    t, arrivals = 0.0, []
    for rid in range(TRANSFERS):
        t += rng.expovariate(rate)
        k = rng.choices(range(len(MIX)), [s for _, s in MIX])[0]
        while eng.heap and eng.heap[0][0] <= t:
            at, _, fn, arg = heapq.heappop(eng.heap)
            fn(at, arg)
        line.add(SimpleNamespace(rid=rid, flow=None), MIX[k][0], t)
        arrivals.append((t, k))
    while eng.heap:
        at, _, fn, arg = heapq.heappop(eng.heap)
        fn(at, arg)
    out: dict[int, list[float]] = {k: [] for k in range(len(MIX))}
    for rid, (t0, k) in enumerate(arrivals[TRANSFERS // 10:], start=TRANSFERS // 10):
        out[k].append(eng.landed[rid] - t0 - MIX[k][0] / LINE_BYTES_PER_S)
    return out


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.9 * len(ordered))]


def _law(size_s: float, rho: float) -> TtftTail:
    """The excess law alone (no P queue) for a transfer of ``size_s`` on the MIX line."""
    first = sum(s * b for b, s in MIX) / LINE_BYTES_PER_S
    second = sum(s * b * b for b, s in MIX) / LINE_BYTES_PER_S ** 2
    idle = WaitModel(0.0, 0.1, 0.01)
    return TtftTail(idle, size_s * rho / (1 - rho), ps_sojourn_var_s2(size_s, rho, second / (2 * first)))


def _law_p90(tail: TtftTail) -> float:
    return mixture_quantile([SimpleNamespace(rps=1.0, det_s=0.0, wait=tail)], 0.90)


@pytest.mark.parametrize("rho", [0.3, 0.6])
@pytest.mark.parametrize("k", [SMALL, LARGE], ids=["small", "large"])
def test_the_line_law_gives_each_transfer_size_its_simulated_p90_excess(rho, k):
    excess = _excess_by_size(rho)[k]
    size_s = MIX[k][0] / LINE_BYTES_PER_S
    law = _law(size_s, rho)
    assert sum(excess) / len(excess) == pytest.approx(law.wan_excess_mean_s, rel=0.08)
    assert _law_p90(law) == pytest.approx(_p90(excess), rel=0.10)


@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_a_tiny_transfer_is_off_by_less_than_half_its_own_size(rho):
    """A transfer far below the line's typical one is slowed by size × N, N the transfers it
    finds (geometric): its P90 sits on one of those steps, which a continuous law cannot hit;
    the law stays within half the transfer's own size (here 0.6 ms) of it."""
    size_s = MIX[TINY][0] / LINE_BYTES_PER_S
    assert abs(_law_p90(_law(size_s, rho)) - _p90(_excess_by_size(rho)[TINY])) < 0.5 * size_s


def test_on_exponential_sizes_the_variance_is_the_m_m_1_processor_sharing_one():
    """Tagged transfers of a fixed size among exponential ones (ρ = 0.5): their sojourn's mean is
    size/(1 − ρ) and its variance Coffman, Muntz & Trotter's closed form, for a small and a large size."""
    rng = random.Random(5)
    eng = _Engine()
    line = WanLink(eng, "a", "b", LINE_BYTES_PER_S, 0.0, 0.0, _Series(), rng)
    rho, mean_s = 0.5, 0.1
    t, tagged = 0.0, {}
    for rid in range(200_000):
        t += rng.expovariate(rho / mean_s)
        while eng.heap and eng.heap[0][0] <= t:
            at, _, fn, arg = heapq.heappop(eng.heap)
            fn(at, arg)
        size_s = rng.expovariate(1 / mean_s)
        if rid % 50 == 0 and rid >= 20_000:  # one in 50 is tagged, at 0.2 or 2 mean sizes
            size_s = mean_s * (0.2 if rid % 100 else 2.0)
            tagged[rid] = (t, size_s)
        line.add(SimpleNamespace(rid=rid, flow=None), size_s * LINE_BYTES_PER_S, t)
    while eng.heap:
        at, _, fn, arg = heapq.heappop(eng.heap)
        fn(at, arg)
    for size_s in (0.2 * mean_s, 2.0 * mean_s):
        sojourn = [eng.landed[rid] - t0 for rid, (t0, x) in tagged.items() if x == size_s]
        mean = sum(sojourn) / len(sojourn)
        var = sum((s - mean) ** 2 for s in sojourn) / len(sojourn)
        assert mean == pytest.approx(size_s / (1 - rho), rel=0.05)
        assert var == pytest.approx(ps_sojourn_var_s2(size_s, rho, mean_s), rel=0.12)


def test_a_large_transfer_spreads_less_than_an_exponential_excess_but_a_small_one_more():
    """Relative to its mean, a transfer long beside the line's others concentrates (variance
    linear in its size); a short one mostly finds the line idle (variance ρ·size²/(1 − ρ)²)."""
    rho, residual = 0.5, 0.35
    small, large = 1e-3, 50.0
    mean = lambda x: x * rho / (1 - rho)  # noqa: E731
    assert ps_sojourn_var_s2(small, rho, residual) == pytest.approx(rho * small ** 2 / (1 - rho) ** 2, rel=1e-2)
    assert ps_sojourn_var_s2(small, rho, residual) > mean(small) ** 2
    slope = 2 * rho * residual / (1 - rho) ** 3
    assert ps_sojourn_var_s2(large, rho, residual) == pytest.approx(slope * large, rel=0.02)
    assert ps_sojourn_var_s2(large, rho, residual) < 0.1 * mean(large) ** 2


#: issue 42's flagship line: a heavy P queue's transfers (two sizes, 0.45 and 0.86 s at full rate), its
#: departures regulated, carrying 70 % of the line's work; the rest small transfers from a Poisson stream.
HEAVY_MIX, LIGHT_MIX = [(0.454, 0.626), (0.857, 0.374)], [(0.08, 0.3), (0.03, 0.3), (0.005, 0.4)]


def _moments(mix: list[tuple[float, float]]) -> tuple[float, float]:
    return sum(s * p for s, p in mix), sum(s * s * p for s, p in mix)


def _fed_line(arrivals: list[tuple[float, float, int]], rng: random.Random) -> _Engine:
    """The simulator's line fed ``arrivals`` (time, transfer seconds at the full rate, stream), sorted;
    the engine after the last landing (``landed`` by arrival index)."""
    eng = _Engine()
    line = WanLink(eng, "a", "b", LINE_BYTES_PER_S, 0.0, 0.0, _Series(), rng)
    for rid, (t, size_s, _) in enumerate(arrivals):
        while eng.heap and eng.heap[0][0] <= t:
            at, _, fn, arg = heapq.heappop(eng.heap)
            fn(at, arg)
        line.add(SimpleNamespace(rid=rid, flow=None), size_s * LINE_BYTES_PER_S, t)
    while eng.heap:
        at, _, fn, arg = heapq.heappop(eng.heap)
        fn(at, arg)
    return eng


@functools.lru_cache(maxsize=None)
def _regulated_line(rho: float, cv2: float, horizon_s: float = 30000.0, seed: int = 11) -> tuple[float, float]:
    """Mean excess per second of own size of the heavy (gamma-renewal gaps of squared coefficient of
    variation ``cv2``) and the light (Poisson) stream's transfers on the simulator's line at ``rho``."""
    rng = random.Random(seed)
    streams = [(rho * 0.7 / _moments(HEAVY_MIX)[0], cv2, HEAVY_MIX), (rho * 0.3 / _moments(LIGHT_MIX)[0], 1.0, LIGHT_MIX)]
    arrivals = []
    for j, (rate, c2, mix) in enumerate(streams):
        t = 0.0
        while t < horizon_s:
            t += rng.gammavariate(1 / c2, c2 / rate)
            arrivals.append((t, rng.choices([s for s, _ in mix], [p for _, p in mix])[0], j))
    arrivals.sort()
    eng = _fed_line(arrivals, rng)
    excess: list[list[float]] = [[], []]
    for rid, (t, size_s, j) in enumerate(arrivals):
        if t > 0.05 * horizon_s:
            excess[j].append((eng.landed[rid] - t - size_s) / size_s)
    return tuple(sum(e) / len(e) for e in excess)


@pytest.mark.parametrize("rho", [0.7, 0.81])
def test_a_regulated_stream_slows_the_line_less_than_poisson_arrivals(rho):
    """The heavy queue's transfers leave it more evenly than Poisson (c_a² 0.25): fewer overlap, and the
    line's excess per second of size is about half the M/G/1-PS ρ/(1 − ρ) for both streams; the law
    with the streams' arrival variability gives the light stream's within 8 % (5-6 % here) and the heavy one's
    within 20 % (13-18 % above it here: a regulated transfer finds even fewer than the work's variance says)."""
    heavy_sim, light_sim = _regulated_line(rho, 0.25)
    (hm, h2), (lm, l2) = _moments(HEAVY_MIX), _moments(LIGHT_MIX)
    heavy, light = line_excess_factors([LineStream(rho * 0.7 / hm, hm, h2, 0.25), LineStream(rho * 0.3 / lm, lm, l2)])
    assert rho / (1 - rho) > 1.6 * light_sim  # the Poisson law, issue 42
    assert heavy == pytest.approx(heavy_sim, rel=0.20)
    assert light == pytest.approx(light_sim, rel=0.08)


def test_poisson_streams_keep_the_m_g_1_processor_sharing_factor():
    """Every stream Poisson: each transfer's excess is ρ/(1 − ρ) of its size, whatever the sizes."""
    (hm, h2), (lm, l2) = _moments(HEAVY_MIX), _moments(LIGHT_MIX)
    factors = line_excess_factors([LineStream(0.6 / hm, hm, h2), LineStream(0.2 / lm, lm, l2)])
    assert factors == pytest.approx((4.0, 4.0))


#: issue 42's flagship P instances: a whole tp32 instance at 80 % and a tp16 one at 40 % prefilling the heavy
#: classes ((share, prefill s, transfer s at the line's full rate)), whose KV leaves when each prefill ends.
HEAVY_TP32, HEAVY_TP16 = [(0.63, 0.827, 0.454), (0.37, 1.452, 0.857)], [(0.63, 1.630, 0.454), (0.37, 2.859, 0.857)]


def _instance_law(rho: float, classes: list[tuple[float, float, float]]) -> WaitModel:
    mean = sum(p * s for p, s, _ in classes)
    return WaitModel(rho, mean, sum(p * s * s for p, s, _ in classes))


def _departures(rho: float, classes, horizon_s: float, rng: random.Random) -> list[tuple[float, float]]:
    """(time its KV leaves, transfer s) of one first-come-first-served P instance on Poisson arrivals."""
    rate, t, free, out = rho / _instance_law(rho, classes).mean_s, 0.0, 0.0, []
    while t < horizon_s:
        t += rng.expovariate(rate)
        _, service_s, size_s = rng.choices(classes, [p for p, _, _ in classes])[0]
        free = max(free, t) + service_s
        out.append((free, size_s))
    return out


@pytest.mark.parametrize("rho", [0.4, 0.8])
def test_a_p_instance_sends_its_kv_as_regularly_as_its_departure_law_says(rho):
    """The gaps between one instance's prefill ends: c² = ρ²c_s² + 1 − ρ² (0.85 at 40 %, 0.41 at 80 %)."""
    times = [t for t, _ in _departures(rho, HEAVY_TP32, 60_000.0, random.Random(2))]
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean = sum(gaps) / len(gaps)
    cv2 = sum((g - mean) ** 2 for g in gaps) / len(gaps) / mean ** 2
    assert cv2 == pytest.approx(departure_cv2(_instance_law(rho, HEAVY_TP32)), abs=0.03)
    assert departure_cv2(dataclasses.replace(_instance_law(rho, HEAVY_TP32), ride=0.3)) == 1.0  # packed: batches


@functools.lru_cache(maxsize=None)
def _instances_line(horizon_s: float = 40_000.0, seed: int = 12) -> tuple[list, dict]:
    """The flagship's line (81 % busy) on the simulator's line: the two heavy instances' departures and a
    Poisson stream of small transfers — (arrivals (time, transfer s, stream), landed by arrival index)."""
    rng = random.Random(seed)
    arrivals = [(t, b, 0) for t, b in _departures(0.8, HEAVY_TP32, horizon_s, rng)]
    arrivals += [(t, b, 1) for t, b in _departures(0.4, HEAVY_TP16, horizon_s, rng)]
    light_mean, _ = _moments(LIGHT_MIX)
    t = 0.0
    while t < horizon_s:
        t += rng.expovariate(0.246 / light_mean)
        arrivals.append((t, rng.choices([s for s, _ in LIGHT_MIX], [p for _, p in LIGHT_MIX])[0], 2))
    arrivals.sort()
    return arrivals, _fed_line(arrivals, rng).landed


def _instances_excess(by_size: bool = False) -> dict:
    """Simulated excess per second of size on :func:`_instances_line`, per stream (or per (stream, size))."""
    arrivals, landed = _instances_line()
    excess: dict = {}
    for rid, (t, size_s, j) in enumerate(arrivals):
        if t > 0.05 * arrivals[-1][0]:
            acc = excess.setdefault((j, size_s) if by_size else j, [0.0, 0.0])
            acc[0] += landed[rid] - t - size_s
            acc[1] += size_s
    return {key: e / s for key, (e, s) in excess.items()}


def _instances_streams(known: bool) -> list[LineStream]:
    """The line's streams: each heavy instance's departures (``known``: with its service points), the light
    stream Poisson."""
    streams = []
    for rho, classes in ((0.8, HEAVY_TP32), (0.4, HEAVY_TP16)):
        law = dataclasses.replace(_instance_law(rho, classes), service=tuple((p, s) for p, s, _ in classes))
        mix = [(b, p) for p, _, b in classes]
        streams.append(LineStream(rho / law.mean_s, *_moments(mix), departure_cv2(law),
                                  departures_of(law) if known else None))
    light_mean, light_second = _moments(LIGHT_MIX)
    streams.append(LineStream(0.246 / light_mean, light_mean, light_second))
    return streams


def test_a_line_fed_by_p_instances_slows_them_less_than_poisson_arrivals_and_no_less_than_it_does():
    """The flagship's line: each stream's excess per second of size is 1.8-2.6 where the M/G/1-PS law says
    4.5; the renewal law fed by the instances' departure c² alone (no instance known) is no more than 5 % below
    it for any stream (a safe promise: +2 % for the 40 % busy instance, +17 % for the Poisson stream) and
    within 1.5x of it (+40 % for the 80 % busy instance: its transfers leave at least a prefill apart, more
    regular than a renewal stream of the same c² — issue 42)."""
    simulated = [_instances_excess()[j] for j in range(3)]
    streams = _instances_streams(known=False)
    line_rho = sum(s.rate_per_s * s.mean_s for s in streams)
    for law, sim in zip(line_excess_factors(streams), simulated):
        assert 0.95 * sim <= law <= 1.5 * sim
        assert sim < 0.6 * line_rho / (1 - line_rho)


def test_a_p_instance_s_transfers_meet_few_of_their_own_on_the_line():
    """With each instance's departures known (its prefills' ends: two of its transfers leave at least a
    prefill apart) every stream's excess per second of size is within 5 % of the simulated line's (1.85 vs
    1.81, 2.43 vs 2.48, 2.60 vs 2.58); the renewal law of the same c² put the 80 % busy instance's at 2.54
    (+40 %) and the small transfers' at 3.01 (+17 %): a large transfer meets the small ones' work in its stay,
    not their count found, and few of its own instance's."""
    simulated = [_instances_excess()[j] for j in range(3)]
    before = line_excess_factors(_instances_streams(known=False))
    for law, sim, old in zip(line_excess_factors(_instances_streams(known=True)), simulated, before):
        assert law == pytest.approx(sim, rel=0.05)
    assert before[0] > 1.3 * simulated[0] and before[2] > 1.1 * simulated[2]


def test_each_transfer_size_meets_its_own_excess():
    """Per size, each heavy transfer's instance last sent KV one prefill of its own before it (or an idle spell
    more): with that, each size's excess is within 12 % of the simulated line's (the 80 % busy instance: 1.93
    vs 2.04 for 0.45 s, 1.77 vs 1.61 for 0.86 s) and the Poisson stream's within 3 % at every size."""
    simulated = _instances_excess(by_size=True)
    sizes = [[(b, s) for _, s, b in HEAVY_TP32], [(b, s) for _, s, b in HEAVY_TP16], [b for b, _ in LIGHT_MIX]]
    for j, (row, laws) in enumerate(zip(sizes, line_excess_at(_instances_streams(known=True), sizes))):
        for item, law in zip(row, laws):
            size = item if isinstance(item, float) else item[0]
            assert law == pytest.approx(simulated[(j, size)], rel=0.12 if j < 2 else 0.03), (j, size)


def test_poisson_streams_meet_the_processor_sharing_factor_at_every_size():
    """Every stream Poisson: each transfer's excess is ρ/(1 − ρ) of its size whatever its size (M/G/1-PS)."""
    (hm, h2), (lm, l2) = _moments(HEAVY_MIX), _moments(LIGHT_MIX)
    streams = [LineStream(0.6 / hm, hm, h2), LineStream(0.2 / lm, lm, l2)]
    for row in line_excess_at(streams, [[0.05, 0.454, 2.0], [0.001, 0.08]]):
        assert row == pytest.approx((4.0,) * len(row))


@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_an_instance_whose_departures_are_poisson_meets_the_processor_sharing_count(rho):
    """A stream priced through its own instance's departures (no prefill, never busy: Poisson gaps) is the
    M/G/1-PS line again: ρ/(1 − ρ) per second of size, the renewal count on its grid exact to 1 % at 90 % busy
    (a left-point grid lost 7 %: one gap's rounding per renewal, 18 renewals in a stay)."""
    rate = rho / 0.1
    poisson = Departures(((1.0, 1e-9),), 0.0, rate)
    for second in (0.01, 0.02):  # fixed and spread sizes
        (x,) = line_excess_factors([LineStream(rate, 0.1, second, 0.99, poisson)])
        assert x == pytest.approx(rho / (1 - rho), rel=0.01)


def test_a_small_transfer_on_a_line_fed_by_p_instances_spreads_less_than_the_geometric_count():
    """Issue 42: on the flagship's line (:func:`_instances_line`, R 0.57: the heavy instances' departures bring
    their work about half as variably as Poisson arrivals) the light stream's excess varies 5-15 % above what the
    count L + R·L² gives (:func:`placer.ttft_tail.congestion_var_factor`), where the M/G/1-PS geometric count
    L + L² put it 53-67 % above the simulated line's."""
    arrivals, landed = _instances_line()
    streams = _instances_streams(known=True)
    rho = sum(s.rate_per_s * s.mean_s for s in streams)
    residual = sum(s.rate_per_s * s.second_s2 for s in streams) / (2 * rho)
    dispersion = work_dispersion(streams)
    sizes = [b for b, _ in LIGHT_MIX]
    for b, x in zip(sizes, line_excess_at(streams, [[], [], sizes])[2]):
        excess = [landed[i] - t - s for i, (t, s, j) in enumerate(arrivals)
                  if j == 2 and s == b and t > 0.05 * arrivals[-1][0]]
        mean = sum(excess) / len(excess)
        simulated = sum((e - mean) ** 2 for e in excess) / len(excess)
        geometric = ps_sojourn_var_s2(b, x / (1 + x), residual)
        law = geometric * congestion_var_factor(x / (1 + x), dispersion)
        assert simulated <= law <= 1.2 * simulated, b
        assert geometric > 1.45 * simulated, b
