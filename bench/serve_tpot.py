"""bench_serve's TPOT over tokens: the statistic the planner predicts, measured and simulated.

in:  a serve's per-request TPOTs (``tpot_s``: each request's mean gap, (last − first token) ÷ (output − 1))
     with their gaps (``tpot_gaps``: output − 1 each; runs saved before it kept ``outputs``, from which
     they are read); a placer scenario and plan to simulate
out: :func:`token_mean` (Σ TPOT × gaps ÷ Σ gaps: the mean time between two tokens of a request, over every
     token), :func:`measured_token_mean` (a serve's), :func:`simulate_with_token_mean` (the simulator's
     result and its mean over tokens, from the requests it measured)

Why (issue 48): the planner's TPOT (``Metrics.tpot_s``, ``placer.decode_state``'s batch law by Little) is a
mean over tokens, while the bench's TPOT P50/P90 are percentiles over requests — and most of the bench's
requests are 16-token turns that decode alone, while the 320-token answers that carry most tokens share
their steps. On the bench's saved runs the measured mean over tokens is 1.0-2.3x the median over requests
(serve18 same-dc-pd 24.8 ms against 14.4), so the planner's cell was read against another statistic.
"""

from __future__ import annotations

import math


def token_mean(tpots: list[float], gaps: list[int]) -> float:
    """Σ tpot × gaps ÷ Σ gaps (NaN without gaps): a request's mean gap weighted by its gaps."""
    weight = sum(gaps)
    return sum(t * g for t, g in zip(tpots, gaps)) / weight if weight > 0 else math.nan


def measured_gaps(res: dict) -> list[int] | None:
    """The gaps (output tokens − 1) behind each of ``res["tpot_s"]``: the serve's ``tpot_gaps``, or (a run saved
    before it kept them) its ``outputs`` of more than one token, in the same order (the executor gives a TPOT to
    every request that made two tokens or more); ``None`` where neither lines up with the TPOTs."""
    tpots = res.get("tpot_s", [])
    gaps = res.get("tpot_gaps")
    if gaps is None and res.get("outputs") is not None:
        gaps = [len(o) - 1 for o in res["outputs"] if o is not None and len(o) > 1]
    return list(gaps) if gaps is not None and len(gaps) == len(tpots) else None


def measured_token_mean(res: dict, outputs: list | None = None) -> float:
    """A serve's TPOT mean over tokens; ``outputs``: the first serve's, for a repeat saved without its own (the
    same trace, greedy: the same lengths). NaN where the gaps are unknown."""
    if "tpot_gaps" not in res and "outputs" not in res and outputs is not None:
        res = {**res, "outputs": outputs}
    gaps = measured_gaps(res)
    return token_mean(res.get("tpot_s", []), gaps) if gaps is not None else math.nan


def simulate_with_token_mean(scenario, plan, config) -> tuple[dict, float]:
    """:func:`placer.sim.simulate`'s result dict and its TPOT mean over tokens: Σ (last − first token) ÷
    Σ (output − 1) over the requests it measured (the simulator's own per-request TPOT, weighted as
    :func:`token_mean` weighs the executor's)."""
    from placer.sim.engine import Simulation, simulate

    totals = [0.0, 0]

    class _Counted(Simulation):
        def _finish(self, req, t: float) -> None:
            if req.rid >= self.warm_n and req.n_out > 1 and req.t_first is not None:
                totals[0] += t - req.t_first
                totals[1] += req.n_out - 1
            super()._finish(req, t)

    result = simulate(scenario, plan, config, simulation_class=_Counted)
    data = result.data if hasattr(result, "data") else result
    return data, totals[0] / totals[1] if totals[1] else math.nan
