"""A class's spread of prompt lengths is a spread of its *new* tokens behind its cached prefix: the P-queue
law's service moments (queue_laws.class_items) and the class workload's draws (workload.synthetic) both
keep the prefix, so a long-context high-hit class does not grow million-token contexts in its tail."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from placer.flows import instance
from placer.problem import Class, resolve
from placer.queue_laws import class_items
from placer.specs import parse_scenario
from placer.workload.fit import classes_from_trace
from placer.workload.synthetic import class_requests
from placer.workload.trace import read_trace, with_hit_rates
from tests.placer.conftest import micro_dict

TRACE = Path(__file__).resolve().parents[1] / "data" / "mooncake_conversation_2000.jsonl"


def test_the_fitted_classes_keep_the_traces_second_moment_of_prefill_time():
    """The P queue waits by E[S²]. The bundled Mooncake trace's fitted classes, priced by the law, hold the
    trace's own E[S²] within 10 % (the classes' means and spreads, not the requests: a few % is the fit's
    loss); scaling a spread class's whole prompt at its hit rate priced its high-hit class (70K-token
    prompts, 97.7 % hit, new-token cv² 4.6) at contexts of millions of tokens: +77 % on B200 tp1."""
    problem = resolve(parse_scenario(micro_dict()))
    im = instance(problem, "H100-SXM", 1)
    records = list(with_hit_rates(read_trace(TRACE), None))
    seconds = np.array([im.prefill_s(r.input_tokens, r.hit_rate) for r in records])
    traced = float(np.mean(seconds ** 2))
    law = 0.0
    for c in classes_from_trace(TRACE):
        cls = Class(c.name, c.share, c.input_tokens, c.output_tokens, c.hit_rate, False, c.new_tokens_cv2)
        law += sum(r * s * s for r, s, *_ in class_items(c.share, cls, im))
    assert abs(law / traced - 1.0) < 0.10


def test_a_spread_class_draws_new_tokens_behind_its_cached_prefix():
    """Drawn prompts of a high-hit spread class keep its cached prefix (input − new tokens) and the class's
    mean new tokens; their prefill's E[S²] is the law's (20,000 draws at cv² 1: sampling error ~3 %)."""
    problem = resolve(parse_scenario(micro_dict()))
    im = instance(problem, "H100-SXM", 1)
    cls = Class("hot", 1.0, 40000, 256, 0.95, False, 1.0)
    draws = class_requests([cls], 10.0, random.Random(3))
    rows = [next(draws) for _ in range(20000)]
    cached = np.array([n_in * hit for _, _, n_in, _, hit, _ in rows])
    new = np.array([n_in * (1 - hit) for _, _, n_in, _, hit, _ in rows])
    assert np.allclose(cached, 38000, rtol=1e-3)
    assert abs(new.mean() / 2000 - 1.0) < 0.05
    drawn = np.mean([im.prefill_s(n_in, hit) ** 2 for _, _, n_in, _, hit, _ in rows])
    law = sum(r * s * s for r, s, *_ in class_items(1.0, cls, im))
    assert abs(law / drawn - 1.0) < 0.10


def test_tail_notes_length_is_new_tokens_behind_the_cached_prefix():
    """The length a tail note names for a long-context high-hit class is the new-token count whose prefill
    alone, behind the class's 64K cached prefix, takes the SLA (scaling the whole prompt at its hit put it
    at under a third of that: the context grew with the factor)."""
    from placer.queue_laws import _sla_length_factor

    problem = resolve(parse_scenario(micro_dict()))
    im = instance(problem, "H100-SXM", 1)
    cls = Class("agentic", 1.0, 65536, 256, 0.98, False, 4.0)
    sla_s = 2.0
    cached = 65536 * 0.98
    lo, hi = 1.0, 1e7  # new tokens whose prefill behind the prefix takes the SLA, by bisection
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if im.prefill_s(cached + mid, cached / (cached + mid)) < sla_s else (lo, mid)
    named = _sla_length_factor(im, cls, sla_s) * cls.new_tokens
    assert abs(named / hi - 1.0) < 0.01


def test_the_milps_prefill_points_keep_the_cached_prefix_as_the_evaluation_does():
    """The MILP's P-queue rows (p_queues.prefill_points) price a spread class's two lengths behind its cached
    prefix, so its E[S²] is the evaluation's (class_items' lognormal bands) within 15 %: both hold the new
    tokens' mean and variance, and a prefill linear in its new tokens would make them equal; the new tokens'
    attention among themselves is not (11 % here). Scaling the whole 70K prompt at 97.7 % hit put the long
    point at a 720K-token context: 41 x the evaluation's E[S²]."""
    from placer.p_queues import prefill_points

    problem = resolve(parse_scenario(micro_dict()))
    im = instance(problem, "H100-SXM", 1)
    cls = Class("hot", 1.0, 70000, 256, 0.977, False, 4.63)
    milp = sum(p * s * s for p, s in prefill_points(cls, im))
    law = sum(r * s * s for r, s, *_ in class_items(1.0, cls, im))
    assert abs(milp / law - 1.0) < 0.15
