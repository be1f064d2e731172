"""The peers' problems posed to placer with aggregated pools allowed: which way the optimum goes.

The scenarios (peers/*.yaml) are built from the peers' public papers and READMEs (each file says
from what). Published answers: DistServe (OPT-13B, A100) — disaggregation wins; AIConfigurator
(Qwen3-32B, H200, TTFT 300 ms, TPOT 10 ms) — disaggregated, 2.39x the tokens/s/GPU; Mélange
(Llama-2-7B, L4/A10G/A100/H100, TPOT 120 ms) — aggregated serving on a GPU mix.

Mélange compares aggregated deployments only. Allowed to disaggregate, placer keeps its GPU mix
but splits the phases: prompts on cheap L4s, decode on A100/A10G. From first principles: a
mixed step runs the prefill chunk's GEMMs and the decode batch's attention one after the other,
and Llama-2-7B's multi-head KV (512 KiB per token in bf16) makes that attention a long KV read,
so every chunk mixed into a decode step stretches it; a decode-only instance has no such
chunks, and prefill, compute-bound, runs best on the chip with the most FLOP/s per dollar.
Most of the traffic (86 %) goes P → decode; a small A pool or two on L4/A10G take the rest, where
a whole further decode instance would sit mostly idle: decode pools reserve each request's final
context at the occupancy quantile (placer.kv_admission), A pools hold the mean and preempt (the
executor's A role), so at the integer margin one A instance is the cheaper remainder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.pdd import AGG, P
from placer.optimize import optimize
from placer.problem import resolve
from placer.specs import load_scenario
from placer.validate import validate

PEERS = Path(__file__).parent / "peers"


@pytest.mark.parametrize(("name", "max_aggregated_share"), [
    ("distserve-opt13b", 0.0),
    ("aiconfigurator-qwen3-32b-h200", 0.0),
    ("melange-llama2-7b", 0.25),  # the phases split once disaggregation is allowed (module docstring)
])
def test_peer_problems_choose_as_the_peers_did(name, max_aggregated_share):
    problem = resolve(load_scenario(PEERS / f"{name}.yaml"))
    plan = optimize(problem)
    roles = {p.role for p in plan.pools if p.count > 0}
    served = sum(r.rps for r in plan.routes)
    aggregated = sum(r.rps for r in plan.routes if r.pipeline == AGG)
    assert P in roles and aggregated <= max_aggregated_share * served
    if max_aggregated_share == 0:
        assert AGG not in roles
    assert validate(problem, plan) == []


def test_melange_like_mix_uses_more_than_one_chip():
    """Mélange's point holds: the cheapest plan mixes GPU types (here, by phase)."""
    problem = resolve(load_scenario(PEERS / "melange-llama2-7b.yaml"))
    plan = optimize(problem)
    assert len({p.chip for p in plan.pools if p.count > 0}) >= 2
