"""Measured chip profiles: the record format the planner reads, and reading it.

| module | in → out |
| --- | --- |
| ``figures`` | samples and bounds → :class:`Measurement`, :class:`Rooflines` (frozen dataclasses) and the roofline rule (:func:`check_roofline`, :class:`RooflineExceededError`); standard library only |
| ``records`` | dicts / JSON → pydantic :class:`ChipProfile`, :class:`LinkProfile`; a profile file or directory → ``measured_from(...)``, the ``measured`` mapping :func:`placer.problem.resolve` takes (efficiencies and ``tables``) |
| ``tables`` | measured latency grids → :class:`MeasuredTable`, monotone log-log interpolation inside the grid, ``None`` outside; standard library only |
| ``table_io`` | the documented CSV (docs/profiles.md) and the ``tables`` of a profile JSON → :class:`MeasuredTable` |
| ``lookup`` | ``measured_instance(model, chip, tp, dtypes, profiles)``: one instance's model from profile paths (what ``placer estimate`` calls); ``matching_tables``: the tables for exactly a model and dtypes |
| ``measured`` | :class:`MeasuredInstanceModel`: the performance model answered from a table, the roofline outside it, and which answered; the check against the datasheet peaks |

Two modules because of one rule: the GPU-side runner (``python3 -m profiler.run``)
needs only torch, triton and the standard library, so it imports ``figures`` (and
this package) alone; ``records`` adds pydantic. The profiler writes these records,
the planner reads them; nothing here imports the profiler, the service or a database.
"""

from placer.profiles.figures import (
    DIMENSIONS,
    SCHEMA_VERSION,
    UNITS,
    Measurement,
    RooflineExceededError,
    Rooflines,
    check_roofline,
)

__all__ = ["DIMENSIONS", "SCHEMA_VERSION", "UNITS", "Measurement", "RooflineExceededError", "Rooflines", "check_roofline"]
