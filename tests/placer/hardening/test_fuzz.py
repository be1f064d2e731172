"""A seeded mutation fuzzer over examples/*.yaml: no mutant may end in a traceback or hang.

Each mutant (a structural change to one field — an extreme, wrong-typed, empty or missing
value, a duplicated or dropped list item — or a byte-level change to the file) is written
to a file and taken the way `placer optimize` takes it up to the solver: read
(placer.readers), validated (placer.specs), resolved (placer.problem) and, for the small
example, built into the MILP (placer.ilp.formulation), where overflows used to surface. Only
a typed PlacerError may come out, within :data:`MUTANT_LIMIT_S`. A few mutants also run
through the real command (`optimize --time-limit 2`), which must exit 0, 2, 3 or 4.
"""

from __future__ import annotations

import copy
import math
import random
import signal
import time
from contextlib import contextmanager

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.errors import PlacerError
from placer.ilp.formulation import build, pdd_architecture
from placer.problem import resolve
from placer.specs import load_scenario
from tests.placer.conftest import EXAMPLES

SEED = 18
MUTANTS = {"pdd-two-dc.yaml": 240, "eight-dc.yaml": 50, "sixteen-dc.yaml": 50}
BUILT = {"pdd-two-dc.yaml"}  # the others' MILPs take seconds to build: read, validate, resolve only
MUTANT_LIMIT_S = 20  # one mutant's read + validate + resolve + build, with room for a loaded machine
VALUES = [0, -1, 1, 1e308, -1e308, math.inf, -math.inf, math.nan, 1e-12, 2**63, True, False, None, "", "[/]",
          "x" * 10_000, [], {}, [1, 2], {"a": 1}, 0.5, 64, 10**9]


def _paths(node, prefix=()):
    """Every (path) to a value inside ``node``."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def _mutate(data: dict, rng: random.Random) -> dict:
    data = copy.deepcopy(data)
    path = rng.choice(list(_paths(data)))
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    key, kind = path[-1], rng.random()
    if kind < 0.7:
        parent[key] = copy.deepcopy(rng.choice(VALUES))
    elif kind < 0.8:
        del parent[key]
    elif kind < 0.9 and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[key]))  # a duplicated item (same name, share twice)
    else:
        parent[key] = [copy.deepcopy(parent[key])] * 3  # a scalar where a list is not expected, or a deeper list
    return data


def _bytes(text: str, rng: random.Random) -> bytes:
    raw = bytearray(text.encode())
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(raw))
        raw[at:at + 1] = bytes([rng.randrange(256)]) if rng.random() < 0.5 else rng.choice(
            [b"\xff", b"\x00", b"{", b"[", b": :", b"\n  - ", b"&a ", b"*a", b"!!python/object "])
    return bytes(raw)


def _mutants():
    rng = random.Random(SEED)
    for name, n in MUTANTS.items():
        text = (EXAMPLES / name).read_text()
        data = yaml.safe_load(text)
        for i in range(n):
            if rng.random() < 0.8:
                yield name, i, yaml.safe_dump(_mutate(data, rng), allow_unicode=True).encode()
            else:
                yield name, i, _bytes(text, rng)


@contextmanager
def _no_hang(seconds: int, what: str):
    def fail(*_):
        raise TimeoutError(f"{what} ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_mutants_give_typed_errors_and_never_hang(tmp_path):
    outcomes = {"valid": 0, "rejected": 0}
    path = tmp_path / "mutant.yaml"
    for name, i, content in _mutants():
        path.write_bytes(content)
        what = f"{name} mutant {i}"
        try:
            with _no_hang(MUTANT_LIMIT_S, what):
                problem = resolve(load_scenario(path))
                if name in BUILT:
                    build(problem, pdd_architecture(problem), "bcr")
            outcomes["valid"] += 1
        except PlacerError as err:
            assert str(err), what
            outcomes["rejected"] += 1
        except Exception as err:  # noqa: BLE001 - the point: nothing but a PlacerError may escape
            pytest.fail(f"{what} raised {type(err).__name__}: {err}\n--- mutant ---\n{content[:2000]!r}")
    assert outcomes["valid"] > 10 and outcomes["rejected"] > 100, outcomes  # the fuzzer reaches both sides


def test_mutants_through_the_command_exit_with_a_contract_code(tmp_path):
    """Six mutants through `placer optimize` (the face, its error rendering and the solver)."""
    codes = []
    for name, i, content in list(_mutants())[:240:40]:
        path = tmp_path / f"m{i}.yaml"
        path.write_bytes(content)
        start = time.monotonic()
        result = CliRunner().invoke(app, ["optimize", str(path), "--time-limit", "2", "--no-marginals", "--json"])
        assert result.exception is None or isinstance(result.exception, SystemExit), (name, i, result.exception)
        assert "Traceback" not in result.output
        assert result.exit_code in (0, 2, 3, 4), (name, i, result.output)
        assert time.monotonic() - start < 2 + 10, (name, i)
        codes.append(result.exit_code)
    assert len(codes) == 6
