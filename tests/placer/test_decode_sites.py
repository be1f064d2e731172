"""Where a relay hands over and which pools a class meets (issue 42, part 1: decode memory as it is lived, the
classes a pool actually serves)."""

from __future__ import annotations


import pytest

from placer.decode_sites import class_kv_waits
from placer.decode_state import DecodeState
from placer.evaluate import analyze
from placer.optimize import SolveConfig, optimize
from placer.pdd import MD, P_RLD_MD, RLD
from placer.plan import PoolKey
from placer.problem import Class, resolve
from placer.shapes import Shape
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict
from tests.placer.sim.test_relay_agreement import CASES


def test_a_relay_hands_over_to_md_in_its_destination_only() -> None:
    """10g-low-hit's class ``low`` decodes on MD in dc-a (direct) and dc-b (direct, and relayed from RLD in dc-a):
    MD in dc-a decodes every token of its requests and streams their first; only dc-b's MD takes the relays' tail.
    Before, every MD row of the class took a share of all its relays: rnd-7-21's MD dc3 B200, where no relay
    lands, was charged 3,639 of its 3,733 tokens/s and planned at batch 84.5 (the simulator's decoder 97-101)."""
    problem = resolve(parse_scenario(small_pdd_dict(**CASES["10g-low-hit"])))
    plan = optimize(problem, SolveConfig(marginals=False))
    relayed = {}
    for a in plan.assignments:
        if a.role == RLD and a.pipeline == P_RLD_MD and a.rps > 0:
            relayed[(a.request_class, a.dst)] = relayed.get((a.request_class, a.dst), 0.0) + a.rps
    classes = {c.name: c for c in problem.classes}
    counts = {p.key: p.count for p in plan.pools}
    decode = analyze(problem, plan).decode
    checked = 0
    for key, st in decode.items():
        if key.role != MD or not st.busy:
            continue
        rows = [a for a in plan.assignments if a.role == MD and a.key == key and a.rps > 0]
        full = sum(a.rps * classes[a.request_class].output_tokens for a in rows) / counts[key]
        first = sum(a.rps for a in rows) / counts[key]
        lands = sum(relayed.get((a.request_class, key.datacenter), 0.0) for a in rows)
        if lands == 0:  # no relay ends here: every token and every first token is this pool's
            assert st.tokens_per_s == pytest.approx(full, rel=1e-9)
            assert st.first_tokens_per_s == pytest.approx(first, rel=1e-9)
        else:  # the relays landing here gave their first token (and their eager ones) on RLD
            assert st.tokens_per_s < full
            assert st.first_tokens_per_s == pytest.approx(first - lands / counts[key], rel=1e-9)
        checked += lands == 0
    assert checked >= 1  # the case has an MD pool with the relayed class and no relay landing


def _pool(name: str, count: int, items: list[tuple[float, Class]], share: float, wait_s: float) -> tuple:
    st = DecodeState(count=count, im=None)
    st.kv_items = [(rate, c, None) for rate, c in items]
    st.tokens_per_s = sum(rate * c.output_tokens for rate, c in items)
    st.kv_wait, st.kv_wait_s = share, wait_s
    return PoolKey(role=MD, datacenter="dc1", chip=name, tp=Shape(4, "tp")), st


def test_a_class_waits_for_kv_as_the_pools_it_is_routed_to() -> None:
    """rnd-7-25-mixed's MD dc1: a B200 tp4 pool (c0, c1, c5, c6) makes 21 % of its arrivals wait 0.77 s for KV, two
    B200 tp8-dep (c1, c2, c3, c4, c6) none. Over the site every class was priced 8 % waiting; c2 and c3, which never
    reach the tp4 pool, came out 17.7 % and 22.7 % over the simulator's P90."""
    c = {n: Class(name=n, share=0.2, input_tokens=2000, output_tokens=100, hit_rate=0.0, filterable=False) for n in ("c0", "c2", "c6")}
    decode = dict([_pool("B200-a", 1, [(120.0, c["c0"]), (10.0, c["c6"])], 0.21, 0.77),
                   _pool("B200-b", 2, [(90.0, c["c2"]), (10.0, c["c6"])], 0.0, 0.0)])
    per_class = class_kv_waits(decode)
    assert (MD, "dc1", "c2") not in per_class  # c2 never waits: it is only on the pool with room
    assert per_class[(MD, "dc1", "c0")] == pytest.approx((0.21, 0.77))
    c6_share, c6_wait = per_class[(MD, "dc1", "c6")]  # c6 on both: 10 of its 30 req/s on the waiting pool
    assert c6_share == pytest.approx(0.21 / 3) and c6_wait == pytest.approx(0.77)
