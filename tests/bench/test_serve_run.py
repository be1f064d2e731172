"""bench/serve_run.py: the warm-up leaves the cluster quiet before the trace starts (issue 48)."""

from __future__ import annotations

import queue
import threading

import pytest

from bench import serve_run
from bench.serve_trace import QUICK, make_trace


class _Stream:
    def __init__(self) -> None:
        self.closed, self.error = threading.Event(), None
        self.closed.set()  # the router closed the stream at once (RLD finished the relayed request)


class _Router:
    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, prompt, sampling):
        self.submitted += 1
        return _Stream()


class _Worker:
    """MD still pulling the warm-up's KV over the line: live for ``busy_polls`` polls."""

    def __init__(self, name: str, busy_polls: int) -> None:
        self.name, self.busy_polls, self.polls = name, busy_polls, 0
        self.inbox: queue.Queue = queue.Queue()

    def stats_live(self) -> int:
        self.polls += 1
        return 1 if self.polls <= self.busy_polls else 0


def test_the_warm_up_returns_only_once_every_instance_holds_nothing():
    """In pdd the shared prompt's stream closes when RLD finishes it, while MD's pull of its KV is still on the
    line: the trace's first conversation then deferred its pull behind it (94-108 ms, issue 48)."""
    router, md, p = _Router(), _Worker("md0", busy_polls=5), _Worker("p0", busy_polls=0)
    serve_run.warm_up(router, make_trace(QUICK, 0), timeout_s=5.0, workers=[p, md])
    assert router.submitted == 2
    assert md.polls > 5  # polled until MD let the warm-up's request go, then once more


def test_a_cluster_that_never_quiets_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"not quiet within 0 s: md0 \(1 live\)"):
        serve_run.wait_quiet([_Worker("md0", busy_polls=10**9)], timeout_s=0.05)
