"""The simulator's event handlers, one module per stage of a request's life.

Each module is a mixin of :class:`placer.sim.engine.Simulation`: its handlers read and write the
simulation's state (``self.heap``, ``self.pools``, ``self.router``, the counters) and schedule the
next stage as ``(time, seq, handler, arg)`` on the one heap; :mod:`placer.sim.engine` keeps the loop,
the state and ``simulate()``.

* :mod:`~placer.sim.events.request` — the request record and its stage, pipeline and pull codes.
* :mod:`~placer.sim.events.arrival` — arrival: cache hits, class, path, instances; rejection.
* :mod:`~placer.sim.events.prefill` — a prefill done: what leaves P, and how.
* :mod:`~placer.sim.events.kv` — KV movement: RDMA, the WAN line's landing, the executor's orders,
  pulls, exports and imports.
* :mod:`~placer.sim.events.relay` — P-RLD-MD: RLD decodes first, the token-ID handoff to MD.
* :mod:`~placer.sim.events.decode` — decode on MD/D/A, the finish and its figures.
"""
