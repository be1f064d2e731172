"""``bench_agreement.py --random N`` draws (issue 42, part 4): the same scenarios for a seed, each one
a valid scenario of the stated ranges, relay-paying settings and a public trace among them."""

from __future__ import annotations

from bench.random_scenarios import load_fraction, random_scenario
from placer.problem import resolve
from placer.specs import parse_scenario


def test_a_seed_draws_the_same_scenarios_and_another_seed_others():
    assert [random_scenario(7, i) for i in range(10)] == [random_scenario(7, i) for i in range(10)]
    assert [load_fraction(7, i) for i in range(10)] == [load_fraction(7, i) for i in range(10)]
    assert random_scenario(7, 0) != random_scenario(8, 0)


def test_drawn_scenarios_are_valid_and_span_the_ranges():
    drawn = [random_scenario(3, i) for i in range(20)]
    kinds = {d["name"].rsplit("-", 1)[1] for d in drawn}
    assert kinds == {"mixed", "relay", "trace"}
    for data in drawn:
        problem = resolve(parse_scenario(data))
        assert 2 <= len(problem.datacenters) <= 8
        assert all(1 <= ln.gbit_per_s <= 100 for ln in problem.links.values())
        assert all(c.input_tokens <= 131_072 for c in problem.classes)
        if "trace" not in data["workload"]:
            assert 2 <= len(problem.classes) <= 11  # relay settings add their cold class
    assert max(len(d["datacenters"]) for d in drawn) >= 6
    assert all(0.2 <= load_fraction(3, i) <= 0.97 for i in range(20))
