"""The engine logs what each prefill, extend and decode step cost, with the table's axes."""

from __future__ import annotations

import pytest

from executor.engine import Engine, EngineConfig, ModelConfig
from executor.engine.forward_log import ForwardLog

MODEL = ModelConfig(num_layers=1, hidden_size=32, num_q_heads=2, num_kv_heads=1, head_dim=16, intermediate_size=64)


def test_each_role_operation_is_logged_with_its_shape():
    eng = Engine.from_seed(MODEL, EngineConfig(backend="torch", block_size=4, num_blocks=64), seed=0, device="cpu")
    first = eng.prefill(list(range(1, 21)))
    second = eng.prefill(list(range(1, 13)) + [99, 98, 97])  # 12 tokens (3 blocks) cached from the first
    eng.decode_step([first.request, second.request])
    eng.extend(first.request, [5, 6])
    log = eng.forward_log
    pre, dec, ext = log.records("prefill"), log.records("decode"), log.records("extend")
    assert [(r.size, r.context) for r in pre] == [(20, 0.0), (3, 12.0)]
    assert [r.size for r in dec] == [2] and dec[0].context == pytest.approx((21 + 16) / 2)
    assert ext[0].size == 3 and ext[0].context == 21  # the pending token and the two given, over 21 with KV
    assert all(r.cpu_s >= 0 and r.wall_s > 0 for r in eng.forward_log.records())
    eng.forward_log.clear()
    assert len(eng.forward_log) == 0


def test_the_log_keeps_the_newest_rows():
    log = ForwardLog(capacity=2)
    for size in (1, 2, 3):
        log.add("decode", size, 10, log.clocks())
    assert [r.size for r in log.records()] == [2, 3]
    with pytest.raises(ValueError, match="capacity"):
        ForwardLog(capacity=0)
