"""The attacks of issue 18 as data: each a file to write and the outcome a user must get.

Shared by the battery (tests/placer/hardening/test_battery.py) and the before/after table
in the issue's note. Not a test module.
"""

from __future__ import annotations

import codecs
import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.placer.conftest import micro_dict


@dataclass(frozen=True)
class Attack:
    """``content`` (bytes) written to ``suffix``; the command must exit ``exit_code`` with
    every string of ``names`` in its error message."""

    name: str
    content: bytes
    exit_code: int
    names: tuple[str, ...]
    suffix: str = ".yaml"
    command: str = "optimize"
    extra: tuple[str, ...] = field(default_factory=tuple)


def _yaml(data: dict) -> bytes:
    return yaml.safe_dump(data, sort_keys=False).encode()


def _with(path: str, value) -> bytes:
    """The micro scenario with the dotted ``path`` set to ``value`` (a list index is a number)."""
    data = micro_dict()
    node, keys = data, path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    node[keys[-1] if not isinstance(node, list) else int(keys[-1])] = value
    return _yaml(data)


def _raw(path: str, text: str) -> bytes:
    """The micro scenario with the line ``  <last key>: ...`` of ``path`` replaced by raw YAML ``text``."""
    marker = "__RAW__"
    data = _with(path, marker).decode()
    return data.replace(f"'{marker}'", text).replace(marker, text).encode()


MICRO_YAML = _yaml(micro_dict())

SCENARIO_ATTACKS = [
    # encodings and nesting (placer/readers.py)
    Attack("utf16", codecs.BOM_UTF16_LE + MICRO_YAML.decode().encode("utf-16-le"), 2, ("s.yaml", "UTF-16")),
    Attack("latin1", MICRO_YAML.replace(b"name: micro", b"name: micr\xe9"), 2, ("s.yaml", "not UTF-8")),
    Attack("binary", bytes(range(256)) * 4, 2, ("s.yaml", "binary")),
    Attack("deep-yaml", b"a: " + b"[" * 100_000 + b"]" * 100_000, 2, ("s.yaml", "nested")),
    Attack("deep-yaml-block", b"- " * 100_000 + b"x", 2, ("s.yaml", "nested")),
    Attack("deep-json", b"{\"a\": " * 100_000 + b"1" + b"}" * 100_000, 2, ("s.json", "nested"), suffix=".json"),
    Attack("duplicate-key", MICRO_YAML + b"name: again\n", 2, ("duplicate key 'name'",)),
    # extreme numbers (placer/fields.py)
    Attack("rps-1e308", _with("workload.arrival_rps", 1e308), 2, ("workload.arrival_rps", "1e+308")),
    Attack("rps-inf", _raw("workload.arrival_rps", ".inf"), 2, ("workload.arrival_rps", "inf")),
    Attack("rps-bool", _raw("workload.arrival_rps", "on"), 2, ("workload.arrival_rps", "True")),
    Attack("rps-string", _with("workload.arrival_rps", "6"), 2, ("workload.arrival_rps",)),
    Attack("util-cap-1e-12", _with("options.utilization_cap", 1e-12), 2, ("options.utilization_cap", "1e-12")),
    Attack("ttft-inf", _raw("sla.ttft_p90_s", ".inf"), 2, ("sla.ttft_p90_s", "inf")),
    Attack("tpot-inf", _raw("sla.tpot_s", ".inf"), 2, ("sla.tpot_s", "inf")),
    Attack("tpot-nan", _raw("sla.tpot_s", ".nan"), 2, ("sla.tpot_s", "nan")),
    Attack("power-inf", _raw("datacenters.0.power_kw", ".inf"), 2, ("datacenters.0.power_kw", "inf")),
    Attack("budget-inf", _raw("options.budget_usd_per_h", ".inf"), 2, ("options.budget_usd_per_h", "inf")),
    Attack("inventory-huge", _with("datacenters.0.inventory", {"H100-SXM": 10**12}), 2,
           ("datacenters.0.inventory.H100-SXM", "1000000000000")),
    Attack("inventory-float", _with("datacenters.0.inventory", {"H100-SXM": 4.5}), 2,
           ("datacenters.0.inventory.H100-SXM", "4.5")),
    Attack("tokens-huge", _with("workload.classes.0.input_tokens", 10**15), 2,
           ("workload.classes.0.input_tokens",)),
    Attack("share-bool", _raw("workload.classes.2.share", "yes"), 2, ("workload.classes.2.share", "True")),
    Attack("tp-bool", _with("options.tp_degrees", [True]), 2, ("options.tp_degrees.0",)),
    Attack("drc-number", _with("options.drc", 1), 2, ("options.drc",)),
    Attack("rtt-inf", _raw("links.0.rtt_ms", ".inf"), 2, ("links.0.rtt_ms", "inf")),
    # names
    Attack("empty-name", _with("name", ""), 2, ("name",)),
    Attack("blank-dc-name", _with("datacenters.0.name", "   "), 2, ("datacenters.0.name", "blank")),
    Attack("empty-class-name", _with("workload.classes.0.name", ""), 2, ("workload.classes.0.name",)),
    Attack("control-char-name", _with("name", "a\x1b[31mb"), 2, ("name", "control")),
]


def _plan(**changes) -> dict:
    """A small plan for the micro scenario (one P and one MD pool), with ``changes``."""
    plan = {"schema_version": 1, "scenario": "micro", "objective": "bcr",
            "pools": [{"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 2},
                      {"role": "MD", "datacenter": "dc-b", "chip": "L40S", "tp": 1, "count": 2}]}
    plan.update(copy.deepcopy(changes))
    return plan


def _pools(*rows) -> list[dict]:
    return [{"role": r, "datacenter": d, "chip": c, "tp": t, "count": n} for r, d, c, t, n in rows]


PLAN_ATTACKS = [
    Attack("plan-unknown-dc", json.dumps(_plan(pools=_pools(("P", "dc-x", "H100-SXM", 1, 1),
                                                            ("MD", "dc-b", "L40S", 1, 1)))).encode(),
           2, ("pools[0].datacenter", "dc-x"), suffix=".json"),
    Attack("plan-unknown-chip", json.dumps(_plan(pools=_pools(("P", "dc-a", "H999", 1, 1),
                                                              ("MD", "dc-b", "L40S", 1, 1)))).encode(),
           2, ("pools[0].chip", "H999"), suffix=".json"),
    Attack("plan-one-over-inventory", json.dumps(_plan(pools=_pools(("P", "dc-a", "H100-SXM", 1, 5),
                                                                    ("MD", "dc-b", "L40S", 1, 2)))).encode(),
           3, ("inventory[dc-a,H100-SXM]", "need 5", "has 4"), suffix=".json"),
    Attack("plan-x100-inventory", json.dumps(_plan(pools=_pools(("P", "dc-a", "H100-SXM", 4, 100),
                                                                ("MD", "dc-b", "L40S", 1, 2)))).encode(),
           3, ("inventory[dc-a,H100-SXM]", "need 400"), suffix=".json"),
    Attack("plan-other-scenario", json.dumps(_plan(scenario="pdd-two-dc")).encode(),
           2, ("plan.scenario", "pdd-two-dc"), suffix=".json"),
    Attack("plan-duplicate-rows", json.dumps(_plan(pools=_pools(("P", "dc-a", "H100-SXM", 1, 1),
                                                                ("P", "dc-a", "H100-SXM", 1, 1),
                                                                ("MD", "dc-b", "L40S", 1, 2)))).encode(),
           2, ("pools[1] repeats pools[0]",), suffix=".json"),
    Attack("plan-no-p-pool", json.dumps(_plan(pools=_pools(("MD", "dc-b", "L40S", 1, 2)))).encode(),
           2, ("no P (or aggregated A) pool",), suffix=".json"),
    Attack("plan-count-1e9", json.dumps(_plan(pools=_pools(("P", "dc-a", "H100-SXM", 1, 10**9),
                                                           ("MD", "dc-b", "L40S", 1, 2)))).encode(),
           2, ("pools.0.count", "1000000000"), suffix=".json"),
    Attack("plan-utf16", codecs.BOM_UTF16_LE + json.dumps(_plan()).encode("utf-16-le"), 2, ("UTF-16",),
           suffix=".json"),
    Attack("plan-deep", b"[" * 100_000 + b"]" * 100_000, 2, ("nested",), suffix=".json"),
    Attack("plan-duplicate-key", json.dumps(_plan())[:-1].encode() + b', "scenario": "micro"}', 2,
           ("duplicate key 'scenario'",), suffix=".json"),
]


def write(tmp: Path, attack: Attack) -> Path:
    path = tmp / f"s{attack.suffix}"
    path.write_bytes(attack.content)
    return path


_LINE = b'{"timestamp": 0, "input_length": 1024, "output_length": 64, "hit_rate": 0.5}\n'

TRACE_ATTACKS = [
    Attack("trace-utf16", codecs.BOM_UTF16_LE + (_LINE * 3).decode().encode("utf-16-le"), 2, ("t.jsonl", "UTF-16"),
           suffix=".jsonl", command="simulate"),
    Attack("trace-binary", _LINE + bytes(range(256)), 2, ("t.jsonl", "line 2", "binary"), suffix=".jsonl",
           command="simulate"),
    Attack("trace-latin1", _LINE + _LINE.replace(b"timestamp", b"timest\xe9mp"), 2, ("t.jsonl", "line 2", "UTF-8"),
           suffix=".jsonl", command="simulate"),
    Attack("trace-deep", _LINE + b"[" * 100_000 + b"]" * 100_000 + b"\n", 2, ("line 2", "nested"),
           suffix=".jsonl", command="simulate"),
]
