"""How a plan change is made when chips are scarce: make-before-break when the free chips hold
the new instances, break-before-make (drain first) when only the old plan's chips do, refused
when even those do not; a change whose new instances never come up puts the old ones back."""

from __future__ import annotations

import pytest

from executor.cluster import LocalCluster
from executor.apply_operation import ApplyOperation
from executor.elastic import BREAK_BEFORE_MAKE, MAKE_BEFORE_BREAK, apply_specs
from executor.engine import SamplingParams
from executor.placement import InstanceSpec

P1 = InstanceSpec("p-tp1", "P", "dc-a", "A", 1)
RLD1 = InstanceSpec("rld-tp1", "RLD", "dc-a", "A", 1)
P2 = InstanceSpec("p-tp2", "P", "dc-a", "A", 2)
MD = InstanceSpec("md", "MD", "dc-b", "B", 1)
MD2 = InstanceSpec("md-2", "MD", "dc-b", "B", 1)


class Inventory(LocalCluster):
    """A LocalCluster on a fixed stock of chips, as a Ray node holds them: an instance starts only
    on free chips (`free_resources` is what `choose_strategy` reads); names in `broken` never start."""

    def __init__(self, specs, capacity, *args, broken=(), gate=None, **kw):
        self.capacity, self.broken, self.gate = capacity, set(broken), gate
        super().__init__(specs, *args, **kw)

    def free_resources(self):
        free = dict(self.capacity)
        for spec in self.specs:
            for key, value in spec.resources.items():
                free[key] = free.get(key, 0.0) - value
        return free

    def start_instance(self, spec, *, joining=True):
        if self.gate is not None:  # a slow start: held until the test opens the gate
            self.gate.wait(30)
        if spec.name in self.broken:
            raise RuntimeError(f"{spec.name}: the node cannot start it")
        if any(v > self.free_resources().get(k, 0.0) + 1e-9 for k, v in spec.resources.items()):
            raise RuntimeError(f"{spec.name}: no free chips")
        return super().start_instance(spec, joining=joining)


def _stock(a_chips: int, b_chips: int = 2) -> dict:
    return {"dc:dc-a": 8.0, "dc:dc-b": 8.0, "chip:A": float(a_chips), "chip:B": float(b_chips)}


@pytest.fixture
def cluster(model_config, engine_config):
    made = []

    def make(capacity, specs=(P1, RLD1, MD), **kw):
        c = Inventory(list(specs), capacity, model_config, engine_config, transport="fake", threads=True, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def _served(c) -> int:
    stream = c.router.submit([256, *b"hello there"], SamplingParams(max_new_tokens=4, stop_at_eos=False))
    return len([e for e in stream.events(timeout_s=30) if e.kind == "token"])


def test_spare_chips_make_before_break(cluster):
    c = cluster(_stock(a_chips=4))
    report = apply_specs(c, [P2, MD], grace_s=5, ready_timeout_s=30)
    assert report.failed is None and report.strategy == MAKE_BEFORE_BREAK
    steps = [(e["instance"], e["event"]) for e in report.events]
    assert steps.index(("p-tp2", "joined")) < steps.index(("p-tp1", "draining"))
    assert sorted(c.router.instances) == ["md", "p-tp2"] and _served(c) == 4


def test_the_new_plan_needs_the_old_plans_chips_so_it_drains_first(cluster):
    c = cluster(_stock(a_chips=2))  # P1 + RLD1 hold both A chips; P2 needs two
    report = apply_specs(c, [P2, MD], grace_s=5, ready_timeout_s=30)
    assert report.failed is None and report.strategy == BREAK_BEFORE_MAKE
    assert "chip:A=2 short" in report.strategy_reason
    steps = [(e["instance"], e["event"]) for e in report.events]
    assert steps.index(("p-tp1", "stopped")) < steps.index(("p-tp2", "starting"))
    assert steps.index(("rld-tp1", "stopped")) < steps.index(("p-tp2", "starting"))
    assert sorted(c.router.instances) == ["md", "p-tp2"] and _served(c) == 4


def test_a_plan_beyond_the_cluster_is_refused_and_nothing_changes(cluster):
    c = cluster(_stock(a_chips=2))
    report = apply_specs(c, [P2, InstanceSpec("p-tp2-b", "P", "dc-a", "A", 2), MD], grace_s=5)
    assert report.failed.startswith("the new plan needs chip:A=2 more than the cluster has")
    assert sorted(c.router.instances) == ["md", "p-tp1", "rld-tp1"] and report.events == []


def test_a_new_instance_that_never_starts_puts_the_old_plan_back(cluster):
    c = cluster(_stock(a_chips=2), broken={"p-tp2"})
    report = apply_specs(c, [P2, MD2, MD], grace_s=5, ready_timeout_s=5)
    assert report.strategy == BREAK_BEFORE_MAKE and "p-tp2" in report.failed
    assert sorted(report.restored) == ["p-tp1", "rld-tp1"]
    assert sorted(c.router.instances) == ["md", "p-tp1", "rld-tp1"] and _served(c) == 4


def test_the_operation_runs_in_the_background_one_at_a_time(cluster):
    from executor.apply_operation import ApplyBusy

    import threading

    gate = threading.Event()
    c = cluster(_stock(a_chips=4), gate=gate)
    op = ApplyOperation()
    assert op.status()["state"] == "idle"
    first = op.start(c, None, [P1, RLD1, MD, MD2], grace_s=5, ready_timeout_s=30, timeout_s=60)
    assert first["state"] == "applying" and first["target"] == ["p-tp1", "rld-tp1", "md", "md-2"]
    with pytest.raises(ApplyBusy):
        op.start(c, None, [P1, MD], grace_s=5, ready_timeout_s=30, timeout_s=60)
    import time

    end = time.monotonic() + 10
    while not op.status()["events"] and time.monotonic() < end:
        time.sleep(0.01)
    now = op.status()  # in progress: the strategy is known, md-2 is starting
    assert now["state"] == "applying" and now["strategy"] == MAKE_BEFORE_BREAK
    gate.set()
    done = op.wait(60)
    assert done["state"] == "succeeded" and done["strategy"] == MAKE_BEFORE_BREAK
    assert [e["event"] for e in done["events"] if e["instance"] == "md-2"] == ["starting", "joined"]
