"""An engine's process keeps freed payload-sized memory in its heap (executor/engine/memory.py).

Each check runs in a fresh interpreter: malloc's settings are the whole process's."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# build an engine as every serving path does, then allocate and free a 64 MiB payload: where did it go?
PROBE = """
import ctypes, ctypes.util, json
from executor.engine import Engine, EngineConfig, ModelConfig

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Info
model = ModelConfig(num_layers=2, hidden_size=64, num_q_heads=4, num_kv_heads=2, head_dim=16, intermediate_size=128)
Engine.from_seed(model, EngineConfig(backend="torch", block_size=16, num_blocks=8), seed=0, device="cpu")
from executor.engine import memory
payload = bytes(64 << 20)
mapped = libc.mallinfo2().hblkhd
del payload
print(json.dumps({"applied": memory.keep_freed_memory(), "mapped": mapped, "free_in_heap": libc.mallinfo2().fordblks}))
"""


def _glibc() -> bool:
    name = ctypes.util.find_library("c")
    return name is not None and hasattr(ctypes.CDLL(name), "mallinfo2")


def _probe(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PLACER_KEEP_FREED_MEMORY"}
    if env_value is not None:
        env["PLACER_KEEP_FREED_MEMORY"] = env_value
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not _glibc(), reason="the policy is glibc's malloc settings (mallinfo2: glibc >= 2.33)")
def test_an_engine_keeps_a_freed_payload_for_the_next_one():
    got = _probe(None)
    assert got["applied"] is True
    assert got["mapped"] < 64 << 20  # served from the heap, not a fresh mapping faulted in page by page
    assert got["free_in_heap"] >= 64 << 20  # and kept there when freed: the next payload reuses its pages


@pytest.mark.skipif(not _glibc(), reason="the policy is glibc's malloc settings (mallinfo2: glibc >= 2.33)")
def test_the_policy_can_be_turned_off():
    got = _probe("0")
    assert got["applied"] is False
    assert got["mapped"] >= 64 << 20  # malloc as it was: a block this large is mapped, and unmapped when freed
