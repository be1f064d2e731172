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


def test_a_plans_directory_pairs_runs_each_scenario_solved_once(monkeypatch, tmp_path, small_plan):
    """``bench_agreement.py --random N --plans-dir D``: the second run reads the plans the first solved
    (the same plan simulated again: paired before/after runs), a changed time limit solves again."""
    from pathlib import Path

    from bench.agreement_cases import small_pdd_dict

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[3] / "bench"))
    import agreement_stats

    solves = []

    def solve(problem, config):
        solves.append(config.time_limit_s)
        return small_plan

    monkeypatch.setattr(agreement_stats, "random_scenario", lambda seed, i: {**small_pdd_dict(), "name": f"rnd-{seed}-{i}"})
    monkeypatch.setattr(agreement_stats, "at_load", lambda data, fraction: data)
    monkeypatch.setattr(agreement_stats, "optimize", solve)
    first = agreement_stats.solve_case(7, 3, 20.0, tmp_path)
    again = agreement_stats.solve_case(7, 3, 20.0, tmp_path)
    assert solves == [20.0] and (tmp_path / "rnd-7-3.json").is_file()
    assert again[0] == first[0] and again[1].to_json() == small_plan.to_json() and again[2] == ""
    agreement_stats.solve_case(7, 3, 5.0, tmp_path)  # another time limit: another plan
    assert solves == [20.0, 5.0]
    agreement_stats.solve_case(7, 3, 5.0, None)  # no directory: always solved
    assert solves == [20.0, 5.0, 5.0]
