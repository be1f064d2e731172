"""Reading user files: bytes → text → YAML/JSON data, every failure an InputError naming the file.

in:  a path (scenario, plan, trace, …) and what the file is, for messages
out: ``read_text`` → str; ``load_data`` → the parsed mapping/list; ``text_lines`` →
     (line number, line) of a large file, streamed

Rules, shared by every file placer reads:

* UTF-8 only (a UTF-8 byte-order mark is dropped). UTF-16/32 (by their byte-order mark),
  files with NUL bytes ("binary") and bytes that are not UTF-8 are rejected, naming the
  file and the offset.
* At most :data:`MAX_FILE_BYTES` (whole-file readers; streamed traces have no cap).
* YAML: safe loading, and a key given twice in one mapping is an error (YAML's own rule;
  PyYAML would silently keep the last). JSON: the same for duplicate keys; ``NaN`` and
  ``Infinity`` are not JSON and are rejected.
* Nesting deeper than :data:`MAX_DEPTH` levels is rejected — before parsing, by a scan of
  the brackets and indentation that cannot recurse, so 100,000-deep input never reaches a
  recursive parser.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from placer.errors import InputError

#: Largest file read whole (scenarios, plans, profiles): 64 MiB.
MAX_FILE_BYTES = 64 * 2**20
#: Deepest nesting of mappings and lists accepted in YAML or JSON.
MAX_DEPTH = 64

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
        for lineno, raw in enumerate(handle, 1):
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


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
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
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
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
