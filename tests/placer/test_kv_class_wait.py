"""Each class's own KV wait at a decoder that admits FIFO with EASY backfilling (issue 42: rnd-7-21's MD dc3 B200
tp4 pool, footprints 53K and 78K beside 22K and 2.3K: the simulator's decoder made the big classes wait 41-49 % of
the time 4.2-4.8 s, the 22K class 33-39 % 0.8 s, the 2.3K class 7-9 % 0.3 s, where the pool's law priced every class
45 %, 3.7 s; :func:`placer.kv_class_wait.class_kv_wait_law` 47-48 % 4.0 s, 39 % 0.57 s, 8 % 0.12 s)."""

from __future__ import annotations

import pytest

from placer.decode_sites import class_kv_waits
from placer.kv_class_wait import class_kv_wait_law
from placer.kv_wait import kv_wait_law
from tests.placer.test_decode_sites import _pool
from tests.placer.test_kv_line_law import CAPACITY, LONG_AND_SHORT, _run
from placer.pdd import MD
from placer.problem import Class

#: rnd-7-21's MD dc3 B200 tp4 pool scaled to CAPACITY (its footprints × 0.05, its outputs): c1 53K over 668
#: tokens, c2 22K over 503, c3 2.3K over 66, c9 78K over 17, by their arrivals there.
LIKE_21 = [(0.333, 2002, 668), (0.131, 612, 503), (0.241, 49, 66), (0.295, 3908, 17)]


def _per_class(mix, fill: float, per_seq_s: float, requests: int, seed: int):
    """(simulated (share, mean wait) per class, the law's per class) past a warm-up fifth (test_kv_line_law's
    decoder fed Poisson arrivals of ``mix``)."""
    arrived, load, phi = _run(mix, fill, per_seq_s, requests, seed)
    warm = arrived[requests // 5:]
    simulated = []
    for _, n_in, n_out in mix:
        waits = [r.t_first - r.t_arr for r in warm if r.n_in == n_in and r.n_out == n_out]
        waited = [w for w in waits if w > 1e-9]
        simulated.append((len(waited) / len(waits), sum(waited) / len(waited)))
    return simulated, class_kv_wait_law(CAPACITY, load, phi), load, phi


def test_one_class_waits_as_the_pool() -> None:
    load = [(10.0, 95.0, 2560.0)]
    [(share, wait)] = class_kv_wait_law(CAPACITY, load, 0.4)
    assert (share, wait) == pytest.approx(kv_wait_law(CAPACITY, load, 0.4), rel=1e-6)


@pytest.mark.parametrize("seed", [1, 2])
def test_small_short_requests_pass_a_line_of_big_ones(seed: int) -> None:
    """rnd-7-21's pool scaled (a step that grows with the batch, 88 % planned fill; 60,000 requests, seeds 1-2:
    the simulator 23-25 % of the big classes waiting 1.9-2.2 s, the 22K class 18 % 0.8 s, the 2.3K class 4 %
    0.4 s): the shares within 0.04, the big classes' waits within 25 %; the smaller classes wait 0.4-0.65 of the
    simulator's (a waiter's retries are priced as fresh chances; the simulator's are correlated) — 0.17-0.5 s
    where the pool's law priced them 1.85 s."""
    simulated, law, load, phi = _per_class(LIKE_21, 0.88, 0.0002, 60_000, seed)
    pool_share, pool_wait = kv_wait_law(CAPACITY, load, phi)
    for (share, wait), (planned_share, planned_wait) in zip(simulated, law):
        assert planned_share == pytest.approx(share, abs=0.04)
    for big in (0, 3):
        assert law[big][1] == pytest.approx(simulated[big][1], rel=0.25)
    for small in (1, 2):
        assert 0.3 * simulated[small][1] < law[small][1] < simulated[small][1]
        assert law[small][1] < 0.3 * pool_wait  # the pool's law: every class its 1.85 s
    assert law[2][0] < law[1][0] < min(law[0][0], law[3][0])  # the simulator's order
    assert simulated[2][0] < simulated[1][0] < min(simulated[0][0], simulated[3][0])
    assert abs(law[2][0] - pool_share) > 0.15  # the pool's law: every class 25 %


def test_where_small_requests_fill_the_line_every_class_waits_alike() -> None:
    """test_kv_line_law's long and short classes at 95 % (footprints 1.3K and 9.2K, most arrivals short, so the line
    is mostly short requests that take the room a newcomer would pass with): the simulator made 58-60 % and
    69-71 % wait 4.8-6.6 and 6.0-7.3 s; the law gives both the line's wait, within 35 % (the pool law's tolerance)."""
    simulated, law, _, _ = _per_class(LONG_AND_SHORT, 0.95, 0.0, 60_000, 2)
    for (share, wait), (planned_share, planned_wait) in zip(simulated, law):
        assert planned_share == pytest.approx(share, abs=0.08)
        assert planned_wait == pytest.approx(wait, rel=0.35)


def test_a_class_is_priced_with_its_own_wait_at_a_pool() -> None:
    """:func:`placer.decode_sites.class_kv_waits` reads each class's own wait (DecodeState.class_kv_wait), not the
    pool's: rnd-7-21's c3 was priced with the big classes' 46 %, 3.8 s."""
    c = {n: Class(name=n, share=0.5, input_tokens=2000, output_tokens=100, hit_rate=0.0, filterable=False)
         for n in ("c1", "c3")}
    key, st = _pool("B200", 2, [(4.0, c["c1"]), (3.0, c["c3"])], 0.46, 3.83)
    st.class_kv_wait = {"c1": (0.47, 4.0), "c3": (0.08, 0.12)}
    waits = class_kv_waits({key: st})
    assert waits[(MD, "dc1", "c3")] == pytest.approx((0.08, 0.12))
    assert waits[(MD, "dc1", "c1")] == pytest.approx((0.47, 4.0))
