"""The decode-side hit a plan's routing realises on a trace (issue 42, rnd-7-4-trace): a conversation whose turns
climb the hit bands is decoded where each turn's class is sent, and a decoder holds only what was decoded there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from placer.workload.decode_hits import destination_shares, routed_decode_hits
from placer.workload.trace import TraceRecord

#: Two classes as a router sees them: a conversation's first turn (nothing cached) and its second (half cached).
CLASSES = [SimpleNamespace(name="cold", hit_rate=0.0, input_tokens=1024, output_tokens=100),
           SimpleNamespace(name="warm", hit_rate=0.5, input_tokens=2048, output_tokens=100)]


def _conversations(n: int) -> list[TraceRecord]:
    """n conversations of two turns: blocks [a, b], then [a, b, c, d] (the first prompt, its answer, a message)."""
    out = []
    for i in range(n):
        a, b, c, d = (4 * i + j for j in range(4))
        out.append(TraceRecord(2.0 * i, 1024, 100, hash_ids=(a, b)))
        out.append(TraceRecord(2.0 * i + 1.0, 2048, 100, hash_ids=(a, b, c, d)))
    return out


def test_second_turns_sent_elsewhere_find_no_prefix():
    """Both turns decoded in dc0: dc0 holds the second turns' first half, as P's store does. First turns in
    dc0, second turns across the line in dc1: dc1 holds none of them, though P's store still holds half —
    the whole prompt's KV crosses, not the uncached half the plan's hit counts."""
    same = routed_decode_hits(_conversations(50), CLASSES, {"cold": {"dc0": 1.0}, "warm": {"dc0": 1.0}})
    assert same[("warm", "dc0")].requests == 50
    assert same[("warm", "dc0")].p_hit == pytest.approx(0.5)
    assert same[("warm", "dc0")].decode_hit == pytest.approx(0.5)
    apart = routed_decode_hits(_conversations(50), CLASSES, {"cold": {"dc0": 1.0}, "warm": {"dc1": 1.0}})
    assert apart[("warm", "dc1")].p_hit == pytest.approx(0.5)
    assert apart[("warm", "dc1")].decode_hit == 0.0
    # what a plan that moved them to dc0 would find there: the first turns' half, sent there or not
    assert apart[("warm", "dc0")].requests == 0
    assert apart[("warm", "dc0")].held == pytest.approx(0.5)
    assert apart[("warm", "dc1")].held == 0.0


def test_a_split_class_holds_its_share_of_the_first_turns():
    """First turns split evenly over dc0 and dc1, second turns all to dc0: about half of them find their first
    turn in dc0 — the decode-side hit is the split's share of P's, not P's."""
    rows = routed_decode_hits(_conversations(2000), CLASSES, {"cold": {"dc0": 0.5, "dc1": 0.5}, "warm": {"dc0": 1.0}},
                              seed=3)
    warm = rows[("warm", "dc0")]
    assert warm.p_hit == pytest.approx(0.5)
    assert warm.decode_hit == pytest.approx(0.25, abs=0.02)


def test_destination_shares_of_a_plan():
    routes = [SimpleNamespace(request_class="warm", dst="dc0", rps=1.0),
              SimpleNamespace(request_class="warm", dst="dc1", rps=3.0),
              SimpleNamespace(request_class="cold", dst="dc0", rps=0.0)]
    assert destination_shares(SimpleNamespace(routes=routes)) == {"warm": {"dc0": 0.25, "dc1": 0.75}}
