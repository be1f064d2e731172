"""One gate for every file the product reads (issue 43, part 1).

Two checks. First, each kind of input has one reader, and each refuses the same hostile bytes
(not UTF-8, nested 100,000 deep, a list where an object belongs) with a named InputError.
Second, an AST scan of placer/, executor/ and profiler/ finds every call that opens or parses a
file (``json.load(s)``, ``yaml.*load``, ``csv.reader``, ``open``/``.open`` for reading,
``read_text``, ``read_bytes``, ``safe_open``, ``Tokenizer.from_file``): each must be in a gate
module or on :data:`ALLOWED` with its reason. A new reader that bypasses the gate fails here;
so does an allow-list entry that no longer matches anything (the list cannot rot).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from placer.errors import InputError
from tests.placer.conftest import micro_dict

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("placer", "executor", "profiler")

#: The gate itself: modules that turn bytes into data under placer.readers' rules.
GATE = {"placer/readers.py"}

#: (module, call) → why it may read or parse without the gate. Calls are named as the scan
#: sees them: ``json.loads``, ``yaml.safe_load``, ``csv.reader``, ``open``, ``.open``,
#: ``.read_text``, ``.read_bytes``, ``safe_open``, ``Tokenizer.from_file``.
ALLOWED: dict[tuple[str, str], str] = {
    ("placer/profiles/table_io.py", "csv.reader"): "splits lines of text the gate read (readers.read_text)",
    ("placer/catalog/__init__.py", ".read_text"): "the catalog CSV shipped inside the package, not user input",
    ("placer/catalog/__init__.py", "csv.DictReader"): "the same packaged catalog",
    ("placer/kernels/source.py", "csv.DictReader"): "splits text the gate read (readers.read_text)",
    ("placer/kernels/tables.py", ".read_bytes"): "the measured kernel tables shipped inside the package "
                                                 "(placer/kernels/data, tools/import_kernels.sh writes them)",
    ("placer/kernels/tables.py", ".read_text"): "the same packaged tables' provenance.json",
    ("placer/kernels/tables.py", "csv.reader"): "the same packaged tables",
    ("placer/kernels/tables.py", "json.loads"): "the same packaged provenance.json",
    ("placer/report/charts.py", ".open"): "a CSV the sweep wrote itself in the same run",
    ("placer/report/charts.py", "csv.DictReader"): "the same CSV the sweep wrote",
    ("placer/cli/plan.py", "json.loads"): "re-parses JSON placer just serialised (Plan.to_json)",
    ("placer/cli/fleetcompare.py", "json.loads"): "the same: JSON placer just serialised (Plan.to_json)",
    ("placer/loadgen/client.py", "json.loads"): "one SSE event of the endpoint the user benchmarks, its line "
                                                "bounded by readers.MAX_LINE_BYTES; malformed data is counted "
                                                "as that request's error",
    ("placer/service/dashboard/views.py", "json.loads"): "a plan row the service stored after validating it",
    ("executor/engine/hf.py", "safe_open"): "binary safetensors shards: the safetensors library checks their "
                                            "header; the shard paths come through readers.confined",
    ("executor/engine/model.py", "safe_open"): "an Engine.save weights file; its JSON metadata goes through "
                                               "readers.parse_data",
    ("executor/engine/hf_tokenizer.py", "Tokenizer.from_file"): "tokenizer.json, parsed by the tokenizers library (Rust, "
                                                       "bounded recursion, failures raised), size-checked first",
    ("executor/engine/kv_payload.py", "json.loads"): "a KV transfer's header from a peer instance (the "
                                                     "instance transport, not a user file)",
    ("executor/transport/messages.py", "json.loads"): "an envelope from a peer instance (instance transport)",
    ("executor/transport/frames.py", "json.loads"): "a frame header from a peer instance (instance transport)",
    ("profiler/link.py", "json.loads"): "the link probe's own peer protocol, one line at a time",
    ("profiler/rooflines.py", ".read_text"): "/proc/cpuinfo, /proc/meminfo and sysfs: the kernel's files",
    ("profiler/memory.py", ".read_text"): "/proc/meminfo",
}

_PARSERS = {("json", "load"), ("json", "loads"), ("yaml", "load"), ("yaml", "safe_load"), ("yaml", "full_load"),
            ("yaml", "unsafe_load"), ("csv", "reader"), ("csv", "DictReader"), ("pickle", "load"),
            ("pickle", "loads"), ("tomllib", "load"), ("tomllib", "loads"), ("Tokenizer", "from_file")}
_METHODS = {"read_text", "read_bytes"}
_WRITE_MODES = set("wax")


def _mode(call: ast.Call, position: int) -> str:
    """The mode argument of open(path, mode) / path.open(mode), "r" when not a literal."""
    args = [kw.value for kw in call.keywords if kw.arg == "mode"] or call.args[position:position + 1]
    return args[0].value if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str) else "r"


def _reads(tree: ast.AST) -> list[tuple[str, int]]:
    """(call as named in ALLOWED, line) of every read or parse of a file in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "open" and not _WRITE_MODES & set(_mode(node, 1)):
                found.append(("open", node.lineno))
            elif func.id == "safe_open":
                found.append(("safe_open", node.lineno))
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if (owner, func.attr) in _PARSERS:
                found.append((f"{owner}.{func.attr}", node.lineno))
            elif func.attr in _METHODS:
                found.append((f".{func.attr}", node.lineno))
            elif func.attr == "open" and owner != "os" and not _WRITE_MODES & set(_mode(node, 0)):
                found.append((".open", node.lineno))
    return found


def _scan() -> dict[tuple[str, str], list[int]]:
    hits: dict[tuple[str, str], list[int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if module in GATE:
                continue
            for call, line in _reads(ast.parse(path.read_text(), module)):
                hits.setdefault((module, call), []).append(line)
    return hits


def test_every_file_read_goes_through_the_gate_or_says_why_not():
    hits = _scan()
    bypass = [f"{module}:{lines[0]} {call}" for (module, call), lines in sorted(hits.items())
              if (module, call) not in ALLOWED]
    assert not bypass, ("these read or parse a file around placer.readers (use readers.load_data / "
                        f"load_mapping / read_text / text_lines, or add to ALLOWED with a reason): {bypass}")
    stale = sorted(set(ALLOWED) - set(hits))
    assert not stale, f"ALLOWED entries that match nothing any more (remove them): {stale}"


def test_the_scan_sees_a_bypass():
    """The scan is not vacuous: each shape of read it must catch is caught, writes are not."""
    code = ("import json, yaml, csv\nfrom pathlib import Path\njson.loads(Path(p).read_text())\n"
            "yaml.safe_load(open(p))\ncsv.reader(Path(p).open())\nopen(p, 'w')\nPath(p).open('a')\n")
    assert sorted(call for call, _ in _reads(ast.parse(code))) == [
        ".open", ".read_text", "csv.reader", "json.loads", "open", "yaml.safe_load"]


# --- one reader per kind, each refusing the same hostile bytes -------------------------------------------------

def _scenario(path: Path):
    from placer.specs import load_scenario
    return load_scenario(path)


def _plan(path: Path):
    from placer.plan import load_plan
    return load_plan(path)


def _profile(path: Path):
    from placer.profiles.records import load_chip_profile
    return load_chip_profile(path)


def _table(path: Path):
    from placer.profiles.table_io import read_csv_tables
    return read_csv_tables(path)


def _trace(path: Path):
    from placer.workload.trace import read_trace
    return list(read_trace(path))


def _checkpoint_config(path: Path):
    from executor.engine.hf import model_config
    path.rename(path.parent / "config.json")
    return model_config(path.parent)


def _shard_index(path: Path):
    from executor.engine.hf import shard_files
    path.rename(path.parent / "model.safetensors.index.json")
    return shard_files(path.parent)


def _tokenizer_config(path: Path):
    from executor.engine.hf_tokenizer import TokenizerError, _json_or_empty
    try:
        return _json_or_empty(path)
    except TokenizerError as err:  # converted to CheckpointError (an InputError) by the checkpoint loader
        raise InputError(str(err)) from None


#: Every kind of file the product reads → its one reader (the request log is a trace: one format).
READERS: dict[str, tuple[str, Callable[[Path], object]]] = {
    "scenario": (".yaml", _scenario), "plan": (".json", _plan), "profile JSON": (".json", _profile),
    "profile CSV": (".csv", _table), "trace / request log": (".jsonl", _trace),
    "checkpoint config": (".json", _checkpoint_config), "shard index": (".json", _shard_index),
    "tokenizer config": (".json", _tokenizer_config),
}

HOSTILE = {"latin-1": (b'{"name": "caf\xe9"}\n', "not UTF-8"), "binary": (b"\x00\x01\x02", "binary"),
           "deep": (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested|not a CSV row"),  # CSV: one 200 kB cell
           "utf-16": ("{}\n".encode("utf-16"), "UTF-16")}


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("kind", sorted(READERS))
def test_each_reader_refuses_hostile_bytes_with_a_named_error(tmp_path, kind, hostile):
    suffix, reader = READERS[kind]
    content, words = HOSTILE[hostile]
    path = tmp_path / f"input{suffix}"
    path.write_bytes(content)
    with pytest.raises(InputError, match=words):
        reader(path)


@pytest.mark.parametrize("kind", ["scenario", "plan", "profile JSON", "checkpoint config", "shard index",
                                  "tokenizer config"])
def test_each_whole_file_reader_wants_an_object_at_the_top(tmp_path, kind):
    suffix, reader = READERS[kind]
    path = tmp_path / f"input{suffix}"
    path.write_bytes(b"[1, 2, 3]\n")
    with pytest.raises(InputError):
        reader(path)


def test_the_readers_still_read_good_files(tmp_path):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(micro_dict()))
    assert _scenario(path).name == "micro"
