"""--verify's cuts as the formulation reads them: κ scales exactly the named pool's capacity
rows (C3, C4, C6, C7) and the named line's (C8), and nothing else."""

from __future__ import annotations

import dataclasses

import pytest

from placer.ilp.formulation import build, pdd_architecture


def _rows(problem) -> dict:
    return {row.name: row for row in build(problem, pdd_architecture(problem)).model.rows}


def test_a_pool_cut_scales_only_that_pools_capacity_rows(micro_problem):
    plain = _rows(micro_problem)
    form = build(micro_problem, pdd_architecture(micro_problem))
    p_key = next(q.key for q in form.pools if q.role == "P")
    cut = _rows(dataclasses.replace(micro_problem, pool_capacity={p_key: 0.5}))
    label = f"{p_key[0]},{p_key[1]},{p_key[2]},tp{p_key[3]}"
    changed = {name for name in plain if plain[name].coeffs != cut[name].coeffs or plain[name].rhs != cut[name].rhs}
    assert changed and all(name.split("[")[0] in ("p_capacity", "p_memory") and label in name for name in changed)
    for name in changed:  # the capacity side (the negative coefficient) is halved, the load side kept
        before, after = plain[name].coeffs, cut[name].coeffs
        assert all(after[v] == pytest.approx(c * (0.5 if c < 0 else 1.0)) for v, c in before.items())


def test_a_line_cut_scales_only_that_lines_limit(micro_problem):
    plain = _rows(micro_problem)
    line = next(iter(sorted(micro_problem.links)))
    cut = _rows(dataclasses.replace(micro_problem, line_capacity={line: 0.25}))
    name = f"link[{line[0]}->{line[1]}]"
    assert cut[name].rhs == pytest.approx(0.25 * plain[name].rhs)
    assert all(cut[n].rhs == plain[n].rhs and cut[n].coeffs == plain[n].coeffs for n in plain if n != name)
