"""The router's registry: which instances exist, which may get new requests, how loaded they are.

In: instances that register and unregister (`InstanceInfo`: name, role, datacenter,
chip, tp, address), drains, joins and the health monitor's view. Out: the instances
of a role that may get new requests now (`by_role`), each one's live-request count
(`load`) and its `PrefixIndex` (the router's guess of its radix cache).

An instance is routable when it is registered, not draining, not joining (an elastic
add that has not answered a heartbeat yet) and not DOWN. A new address under a known
name is a restarted instance: it gets a fresh prefix index and is tracked afresh by
the health monitor. Plain bookkeeping: the router calls it under its own lock. No
torch, no threads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from executor.health import HealthMonitor, PeerState
from executor.routing import PrefixIndex
from placer import pdd
@dataclass(frozen=True)
class InstanceInfo:
    """A serving instance as the router knows it."""

    name: str
    role: str
    datacenter: str
    chip: str = "cpu"
    tp: int = 1
    address: str | None = None

    def __post_init__(self) -> None:
        if self.role not in pdd.ROLES:
            raise ValueError(f"role must be one of {pdd.ROLES}, got {self.role!r}")


class InstanceRegistry:
    """Registered instances, their routability, load and prefix indexes."""

    def __init__(self, block_size: int, health: HealthMonitor) -> None:
        self.block_size = block_size
        self.health = health
        self.instances: dict[str, InstanceInfo] = {}
        self.draining: set[str] = set()
        self.joining: set[str] = set()
        self.load: Counter[str] = Counter()
        self.indexes: dict[str, PrefixIndex] = {}

    def add(self, info: InstanceInfo, *, joining: bool) -> bool:
        """Add or replace `info`; whether it replaced a known name at another address (a restart)."""
        old = self.instances.get(info.name)
        self.instances[info.name] = info
        moved = old is not None and old.address != info.address
        if old is None or moved:
            self.indexes[info.name] = PrefixIndex(self.block_size)
            self.health.add(info.name)
        if joining:
            self.joining.add(info.name)
        self.draining.discard(info.name)
        return moved

    def remove(self, name: str) -> None:
        self.instances.pop(name, None)
        self.indexes.pop(name, None)
        self.health.remove(name)
        self.draining.discard(name)
        self.joining.discard(name)

    def routable(self, name: str) -> bool:
        return (name in self.instances and name not in self.draining and name not in self.joining
                and self.health.state(name) is not PeerState.DOWN)

    def by_role(self, role: str, datacenter: str | None = None,
                exclude: frozenset[str] | set[str] = frozenset()) -> list[InstanceInfo]:
        """Instances of `role` (in `datacenter`, if given) that may get new requests, less `exclude`."""
        return [i for i in self.instances.values()
                if i.role == role and (datacenter is None or i.datacenter == datacenter)
                and i.name not in exclude and self.routable(i.name)]
