"""Workloads: traces in, request classes and simulator work items out.

Public surface: :func:`classes_from_trace` (a scenario's ``workload.trace``),
:func:`fit_classes` (records or the service's request log → classes), :func:`read_trace`,
and the simulator's sources :func:`class_requests`, :class:`AgenticSessions`,
:func:`trace_requests`. See README.md beside this file.
"""

from placer.workload.arrivals import Burstiness
from placer.workload.fit import classes_from_trace, fit_classes, trace_arrival_cv2, trace_arrival_rps
from placer.workload.synthetic import AgenticSessions, class_requests, trace_requests
from placer.workload.trace import BLOCK_TOKENS, TraceRecord, read_trace, with_hit_rates

__all__ = [
    "AgenticSessions", "BLOCK_TOKENS", "Burstiness", "TraceRecord", "class_requests", "classes_from_trace",
    "fit_classes", "read_trace", "trace_arrival_cv2", "trace_arrival_rps",
    "trace_requests", "with_hit_rates",
]
