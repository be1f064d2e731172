"""The executor's MD and RLD admit imported KV by the simulator's rule (issue 42, head-of-line
blocking): through ``KvGated`` a KV that fits passes a giant waiting at the head when its output
budget ends before the giant's room comes, on the worker's own decode-step clock; the giant is
imported as soon as the request holding its room leaves. No cluster, no Ray: the mixin alone."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from executor.engine import SamplingParams
from executor.roles.common import KvGated
from executor.transport.messages import KVDone
from placer.kv_admission import KvGate


class _Decoder(KvGated):
    """What MD and RLD give the mixin: a gate, the waiting holders, an import, a step counter."""

    def __init__(self, capacity_tokens: int) -> None:
        self.kv_gate = KvGate(capacity_tokens)
        self.engine = SimpleNamespace(config=SimpleNamespace(block_size=16))
        self.counters: Counter[str] = Counter()
        self.holders: dict[str, SimpleNamespace] = {}
        self.imported: list[str] = []
        self.sent: list = []

    def order(self, rid: str, prompt_tokens: int, max_new: int) -> None:
        self.holders[rid] = SimpleNamespace(order=SimpleNamespace(
            prompt=[1] * prompt_tokens, sampling=SamplingParams(max_new_tokens=max_new, stop_at_eos=False)))

    def _kv_waiter(self, request_id: str):
        return None if request_id in self.imported else self.holders.get(request_id)

    def _import(self, src: str, kv, holder) -> None:
        self.imported.append(kv.request_id)

    def send(self, dst: str, msg) -> None:
        self.sent.append(msg)

    def step(self, n: int = 1) -> None:
        self.counters["decode_steps"] += n


def _kv(rid: str) -> SimpleNamespace:
    return SimpleNamespace(request_id=rid)


def test_the_executors_decoder_lets_a_short_request_pass_a_giant_and_imports_the_giant_on_time():
    d = _Decoder(1000)
    d.order("A", 600, 40)  # 640 tokens for up to 40 steps
    d.order("G", 560, 80)  # 640: waits for A
    d.order("short", 100, 12)  # 112 for up to 12 steps: gone before A
    d.order("long", 100, 300)  # 400: no room now, and none beside G once A leaves
    for rid in ("A", "G", "short", "long"):
        d.on_kv("p0", _kv(rid))
    assert d.imported == ["A", "short"]  # strict FIFO imported "A" alone
    assert d.counters["kv_admission_waits"] == 2
    d.step(12)
    d._release_kv("short")
    assert d.imported == ["A", "short"]  # its room is G's
    d.step(28)
    d._release_kv("A")
    assert d.imported == ["A", "short", "G"]
    assert not any(isinstance(m, KVDone) for m in d.sent)
