"""Load generator: a scenario's workload against any OpenAI-compatible endpoint (see README.md beside this file).

Public surface: :func:`run_bench` (scenario + :class:`BenchConfig` [+ plan] → :class:`BenchResult`),
:class:`EndpointError`.
"""

from placer.loadgen.run import BenchConfig, BenchResult, EndpointError, run_bench

__all__ = ["BenchConfig", "BenchResult", "EndpointError", "run_bench"]
