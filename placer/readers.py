"""Reading user files: bytes → text → YAML/JSON data, every failure an InputError naming the file.

in:  a path (scenario, plan, trace, …) and what the file is, for messages
out: ``read_text`` → str; ``load_data`` → the parsed mapping/list; ``load_mapping`` → the
     parsed mapping (a list or a scalar at the top is an error); ``text_lines`` → (line
     number, line) of a large file, streamed; ``number`` → one finite, bounded number of a
     record parsed by hand; ``confined`` → a name from a file made a path inside its folder

This module is the gate: every file the product reads (scenario, plan, profile JSON and
CSV, trace, request log, checkpoint config, shard index and tokenizer config) is read
through it; tests/placer/hardening/test_readers_gate.py fails when a module reads or
parses a user file around it.

Rules, shared by every file placer reads:

* UTF-8 only (a UTF-8 byte-order mark is dropped). UTF-16/32 (by their byte-order mark),
  files with NUL bytes ("binary") and bytes that are not UTF-8 are rejected, naming the
  file and the offset.
* At most :data:`MAX_FILE_BYTES` (whole-file readers); streamed files (traces, request logs)
  have no total cap but at most :data:`MAX_LINE_BYTES` a line.
* YAML: safe loading, and a key given twice in one mapping is an error (YAML's own rule;
  PyYAML would silently keep the last). Parsed by libyaml where PyYAML was built with it (~5×
  faster: a 780-line scenario in 0.4 s, not 2 s, which counts against ``--time-limit``); a file
  it rejects is parsed again by PyYAML's own parser, whose message shows the offending line.
  JSON: the same for duplicate keys; ``NaN`` and ``Infinity`` are not JSON and are rejected.
* Numbers read by hand (:func:`number`): not a boolean, finite, within stated bounds, an
  integer where one is due.
* A path named inside a file (:func:`confined`) stays inside the file's folder: absolute
  names and ``..`` that climbs out are refused with one message whether or not the outside
  path exists.
* Nesting deeper than :data:`MAX_DEPTH` levels is rejected — before parsing, by a scan of
  the brackets and indentation that cannot recurse, so 100,000-deep input never reaches a
  recursive parser.
"""

from __future__ import annotations

import codecs
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from placer.errors import InputError

#: Largest file read whole (scenarios, plans, profiles): 64 MiB.
MAX_FILE_BYTES = 64 * 2**20
#: Deepest nesting of mappings and lists accepted in YAML or JSON.
MAX_DEPTH = 64
#: Longest line of a streamed file (a trace or request-log line; a 10M-token prompt's
#: hash_ids take about 200 kB).
MAX_LINE_BYTES = 4 * 2**20

_WIDE_BOMS = {codecs.BOM_UTF32_LE: "UTF-32", codecs.BOM_UTF32_BE: "UTF-32",
              codecs.BOM_UTF16_LE: "UTF-16", codecs.BOM_UTF16_BE: "UTF-16"}


def _decode(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8 text (BOM dropped), or InputError saying what it is instead."""
    for bom, name in _WIDE_BOMS.items():  # UTF-32 LE starts with UTF-16 LE's BOM: check it first
        if raw.startswith(bom):
            raise InputError(f"{where} is {name} text; save it as UTF-8")
    nul = raw.find(b"\0")
    if nul >= 0:
        raise InputError(f"{where} is a binary file (NUL byte at offset {nul}), not UTF-8 text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"{where} is not UTF-8 text: byte 0x{raw[err.start]:02x} at offset {err.start}") from None


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of the file ``what`` (e.g. "scenario file") at ``path``."""
    path = Path(path)
    where = f"{what} {str(path)!r}"
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise InputError(f"cannot read {where}: {err.strerror or err}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(f"{where} is larger than {MAX_FILE_BYTES // 2**20} MiB")
    return _decode(raw, where)


def text_lines(path: str | Path, what: str) -> Iterator[tuple[int, str]]:
    """Stream (line number from 1, line) of a UTF-8 file; a line that is not UTF-8 text is an
    InputError naming the file and line."""
    path = Path(path)
    where = f"{what} {str(path)!r}"
    try:
        handle = path.open("rb")
    except OSError as err:
        raise InputError(f"cannot read {where}: {err.strerror or err}") from None
    with handle:
        for lineno, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{where} line {lineno} is longer than {MAX_LINE_BYTES // 2**20} MiB")
            if lineno == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8) if not raw.startswith(tuple(_WIDE_BOMS)) else raw
            yield lineno, _decode(raw, f"{where} line {lineno}")


def nesting_depth(text: str) -> int:
    """An upper bound on the nesting of YAML/JSON ``text``: the most unclosed [ and { (outside
    quotes, roughly) plus the deepest indentation level. Never recurses."""
    depth = deepest = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch == "\n":
            quote = ""  # a quote never spans lines in the files we read; an apostrophe must not blind the scan
    block = max((_block_depth(line) for line in text.splitlines() if line.strip()), default=0)
    return deepest + block


def _block_depth(line: str) -> int:
    """YAML block nesting a line opens: its indentation (two spaces a level) and its leading
    "- " items (``- - - x`` is three lists deep)."""
    rest = line.lstrip(" ")
    levels = (len(line) - len(rest)) // 2
    while rest.startswith("- ") or rest == "-":
        levels, rest = levels + 1, rest[2:].lstrip(" ")
    return levels


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader with duplicate mapping keys as errors."""


class _FastStrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """:class:`_StrictLoader` on libyaml's parser (PyYAML's own where it was built without it): the
    same constructors, so the same data."""


def _no_duplicates(loader: yaml.constructor.SafeConstructor, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, (dict, list)):
            raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a scalar", key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key].line + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)
_FastStrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _load_yaml(text: str) -> Any:
    """``text`` parsed by the fast loader; where it fails, by PyYAML's own, whose error message quotes
    the offending line (libyaml's names only its line and column) — and whose data stand if it reads
    what libyaml refused."""
    try:
        return yaml.load(text, Loader=_FastStrictLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _json_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def parse_data(text: str, kind: str, where: str) -> Any:
    """Parse ``text`` as ``kind`` ("yaml" or "json") under the rules above."""
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise InputError(f"{where} is nested about {depth} levels deep (at most {MAX_DEPTH} allowed)")
    try:
        if kind == "json":
            return json.loads(text, object_pairs_hook=_json_object, parse_constant=_json_constant)
        return _load_yaml(text)
    except (json.JSONDecodeError, yaml.YAMLError, ValueError) as err:
        raise InputError(f"{where} is not valid {kind.upper()}: {err}") from None
    except RecursionError:
        raise InputError(f"{where} is nested too deeply to read") from None


def load_data(path: str | Path, what: str, kind: str | None = None) -> Any:
    """Read and parse the file ``what`` at ``path``: JSON when ``kind`` is "json" or the name
    ends in .json, else YAML (a superset of JSON)."""
    path = Path(path)
    kind = kind or ("json" if path.suffix.lower() == ".json" else "yaml")
    return parse_data(read_text(path, what), kind, f"{what} {str(path)!r}")


def load_mapping(path: str | Path, what: str, kind: str | None = None) -> dict:
    """:func:`load_data` of a file whose top level must be a mapping (a JSON object)."""
    data = load_data(path, what, kind)
    if not isinstance(data, dict):
        raise InputError(f"{what} {str(path)!r} must hold an object (a mapping) at the top, "
                         f"not {_kind_of(data)}")
    return data


def _kind_of(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def number(value: Any, where: str, *, lo: float, hi: float, integer: bool = False) -> float:
    """``value`` (read from a file by hand) as a finite number in [lo, hi], or InputError
    naming ``where`` (the file and field) and the value. A boolean is not a number; an
    ``integer`` field takes no fraction (the value comes back as an int)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{where} must be a finite number, got {value!r}")
    if integer and value != int(value):
        raise InputError(f"{where} must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise InputError(f"{where} must be in [{_bound(lo)}, {_bound(hi)}], got {value!r}")
    return int(value) if integer else value


def _bound(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def confined(folder: str | Path, name: Any, where: str, folder_name: str = "folder") -> Path:
    """``folder / name`` for a relative ``name`` read from a file (a shard, a table), or
    InputError when the name is not a string or would leave ``folder``: absolute, or ``..``
    climbing out. Decided on the name alone, before the file system is asked, so the error
    never tells which outside paths exist. (Symbolic links the operator placed inside the
    folder are followed: the Hugging Face cache's snapshot folders are made of them.)"""
    if not isinstance(name, str) or not name or "\0" in name:
        raise InputError(f"{where}: a file name must be a non-empty string, got {name!r}")
    normal = os.path.normpath(name)
    if os.path.isabs(name) or normal == ".." or normal.startswith(".." + os.sep) or normal == ".":
        raise InputError(f"{where}: {name!r} is outside the {folder_name}")
    return Path(folder) / normal
