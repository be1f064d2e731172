"""A simulator run that also keeps its request log: what each finished request was, as a deployment logs it.

in:  what :func:`placer.sim.simulate` takes (scenario or problem, plan, :class:`~placer.sim.SimConfig`)
out: the run's JSON (as :func:`placer.sim.simulate`) and its records: per finished request (warm-up
     included) ``input_tokens``, ``output_tokens``, ``hit_rate`` and ``ttft_s`` — the fields a
     replanning job fits its window's classes from (:func:`placer.workload.fit_classes`)

A subclass of :class:`placer.sim.engine.Simulation` that notes each request where it finishes; the
event handlers are the simulator's own. The replanning loop (``placer.replan.loop``) fits the
replanned fleet's workload from these records: the requests its simulated fleet served. Added for
issue 46 beside the simulator's modules; :func:`placer.sim.simulate` runs it (``simulation_class``).
"""

from __future__ import annotations

from placer.sim.engine import Simulation


class RecordingSimulation(Simulation):
    """:class:`Simulation` keeping ``records``: one dict per finished request."""

    def _init_stats(self) -> None:
        super()._init_stats()
        self.records: list[dict] = []

    def _finish(self, req, t: float) -> None:
        self.records.append({"input_tokens": req.n_in, "output_tokens": req.n_out, "hit_rate": req.hit,
                             "ttft_s": (req.t_first - req.t_arr) if req.t_first is not None else None})
        super()._finish(req, t)


def simulate_recorded(scenario, plan, config=None) -> tuple[dict, list[dict]]:
    """:func:`placer.sim.simulate` with the run's request log (see the module docstring)."""
    from placer.sim.engine import simulate

    runs: list[RecordingSimulation] = []

    def build(*args) -> RecordingSimulation:
        runs.append(RecordingSimulation(*args))
        return runs[-1]

    result = simulate(scenario, plan, config, simulation_class=build)
    return result.data, runs[0].records
