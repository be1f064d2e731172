"""The executor's decoders admit by the planner's and the simulator's KV rule (issue 42, part 1):
MD imports a request's KV only when its whole final context (prompt + output budget, in blocks)
fits beside the reservations it holds; otherwise the KV waits, FIFO, until a request leaves."""

from __future__ import annotations

from executor.cluster import LocalCluster
from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams
from executor.placement import InstanceSpec
from executor.routing import Pipeline
from placer.kv_admission import footprint_tokens
from tests.executor.support import only, serving

PROMPTS = [[256, *b"the quick brown fox jumps over the lazy dog"], [256, *b"a different prompt, about as long as it"]]
MAX_NEW = 40


def test_md_waits_for_kv_room_instead_of_running_out_of_blocks():
    model = ModelConfig(num_layers=2, hidden_size=64, num_q_heads=4, num_kv_heads=2, head_dim=16,
                        intermediate_size=128)
    engine = EngineConfig(backend="torch", block_size=4, num_blocks=32)  # 128 tokens: one request's final context
    need = [footprint_tokens(len(p) + 1, MAX_NEW, 4) for p in PROMPTS]
    assert max(need) <= 128 < sum(need)
    sampling = SamplingParams(max_new_tokens=MAX_NEW, stop_at_eos=False)
    reference = Engine.from_seed(model, EngineConfig(backend="torch", block_size=4, num_blocks=256), seed=0,
                                 device="cpu")
    specs = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("md0", "MD", "dc-b", "B")]
    with LocalCluster(specs, model, engine, serving(routing=only(Pipeline.P_MD)), transport="fake",
                      threads=False) as c:
        streams = [c.router.submit(p, sampling) for p in PROMPTS]
        c.run_until(lambda: all(s.closed.is_set() for s in streams), timeout_s=60)
        assert [s.error for s in streams] == [None, None]
        assert [s.result() for s in streams] == [reference.generate(p, MAX_NEW, sampling) for p in PROMPTS]
        assert c.worker("md0").counters["kv_admission_waits"] >= 1
        assert not c.worker("md0").kv_gate.reserved and not c.worker("md0").kv_gate.waiting
