"""The reader attacks of issue 43 as data: hostile profiles, profile tables, traces and checkpoints.

Each :class:`ReaderAttack` is a set of files to write and the ``placer`` command to run on them;
the user must get exit ``exit_code`` with every string of ``names`` in the message, never a
traceback. Shared by the regression tests (tests/placer/hardening/test_reader_attacks.py) and
the before/after counts (``python -m tests.placer.hardening.reader_battery``). Not a test module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
H200_PROFILE = REPO / "docs" / "profiles" / "h200-2026-11-30.json"
EXAMPLE_CSV = REPO / "docs" / "profiles" / "llama-3.1-8b-h100-example.csv"
CSV_HEADER = "chip,tp,model,weight_dtype,kv_dtype,phase,tokens,batch,context_tokens,seconds,source\n"


@dataclass(frozen=True)
class ReaderAttack:
    """``files`` (relative path → bytes) written to a fresh folder; ``command`` is the placer
    command line with ``{dir}`` standing for that folder."""

    name: str
    files: dict[str, bytes]
    command: tuple[str, ...]
    exit_code: int
    names: tuple[str, ...]
    kind: str = "profile"
    extra: dict = field(default_factory=dict)


# --- profiles -------------------------------------------------------------------------------------------------

def _profile(**changes) -> dict:
    data = json.loads(H200_PROFILE.read_text())
    for dotted, value in changes.items():
        node, keys = data, dotted.split(".")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return data


def _with_table(prefill: dict) -> dict:
    """The H200 profile (schema 2) with one prefill table for llama-3.1-8b on one chip."""
    table = {"chip": "H200-SXM", "tp": 1, "model": "llama-3.1-8b", "weight_dtype": "bf16", "kv_dtype": "bf16",
             "prefill": prefill}
    return _profile(schema_version=2, tables=[table])


def _grid(sizes, contexts, seconds) -> dict:
    return {"sizes": sizes, "context_tokens": contexts, "seconds": seconds}


_ESTIMATE = ("estimate", "--model", "llama-3.1-8b", "--chip", "H200-SXM", "--tp", "1", "--input", "1024",
             "--output", "64", "--batch", "8", "--json", "--profiles")
_GOOD_GRID = _grid([512, 4096], [0, 8192], [[0.05, 0.09], [0.4, 0.6]])


def _estimate(file: str) -> tuple[str, ...]:
    return (*_ESTIMATE, "{dir}/" + file)


def _json_bytes(data) -> bytes:
    return json.dumps(data).encode()


def sparse_csv(rows: int) -> bytes:
    """A decode table of ``rows`` lines, each at its own batch and context: a rows × rows grid
    with rows² − rows points missing (the CSV of issue 43 was 1.3 MB)."""
    lines = [CSV_HEADER]
    lines += [f"H200-SXM,1,llama-3.1-8b,bf16,bf16,decode,,{i + 1},{i},0.{i + 100},x\n" for i in range(rows)]
    return "".join(lines).encode()


def _csv_with(line: str) -> bytes:
    return (CSV_HEADER + "H200-SXM,1,llama-3.1-8b,bf16,bf16,decode,,8,1024,0.01,x\n" + line).encode()


_PROFILE_BYTES = H200_PROFILE.read_bytes()

PROFILE_ATTACKS = [
    ReaderAttack("profile-latin1", {"p.json": _PROFILE_BYTES.replace(b'"host": "vm"', b'"host": "v\xe9m"')},
                 _estimate("p.json"), 2, ("p.json", "not UTF-8")),
    ReaderAttack("profile-deep", {"p.json": b'{"a": ' * 100_000 + b"1" + b"}" * 100_000},
                 _estimate("p.json"), 2, ("p.json", "nested")),
    ReaderAttack("profile-list", {"p.json": b"[" * 50 + b"]" * 50}, _estimate("p.json"), 2, ("p.json",)),
    ReaderAttack("profile-binary", {"p.json": bytes(range(256)) * 4}, _estimate("p.json"), 2, ("p.json", "binary")),
    ReaderAttack("profile-nan", {"p.json": _PROFILE_BYTES.replace(b'"quick": false', b'"quick": false, "duration_s": NaN')},
                 _estimate("p.json"), 2, ("p.json", "NaN")),
    ReaderAttack("profile-compute-eff-0", {"p.json": _json_bytes(_profile(**{"efficiency.compute_efficiency": 0}))},
                 _estimate("p.json"), 2, ("p.json", "compute_efficiency")),
    ReaderAttack("profile-mem-eff-0", {"p.json": _json_bytes(_profile(**{"efficiency.mem_bw_efficiency": 0}))},
                 _estimate("p.json"), 2, ("p.json", "mem_bw_efficiency")),
    ReaderAttack("profile-eff-1e-300", {"p.json": _json_bytes(_profile(**{"efficiency.compute_efficiency": 1e-300}))},
                 _estimate("p.json"), 2, ("p.json", "compute_efficiency", "0.001")),
    ReaderAttack("profile-eff-5e-324", {"p.json": _json_bytes(_profile(**{"efficiency.mem_bw_efficiency": 5e-324}))},
                 _estimate("p.json"), 2, ("p.json", "mem_bw_efficiency")),
    ReaderAttack("profile-grid-negative", {"p.json": _json_bytes(_with_table(
        _grid([-5, 4096], [0, 8192], [[0.05, 0.09], [0.4, 0.6]])))}, _estimate("p.json"), 2, ("p.json", "sizes")),
    ReaderAttack("profile-grid-negative-context", {"p.json": _json_bytes(_with_table(
        _grid([512, 4096], [-3, 8192], [[0.05, 0.09], [0.4, 0.6]])))}, _estimate("p.json"), 2,
        ("p.json", "context_tokens")),
    ReaderAttack("profile-grid-nan", {"p.json": _json_bytes(_with_table(_GOOD_GRID)).replace(b"[512, 4096]",
                                                                                              b"[NaN, 4096]")},
                 _estimate("p.json"), 2, ("p.json", "NaN")),
    ReaderAttack("profile-grid-1e308", {"p.json": _json_bytes(_with_table(
        _grid([512, 1e308], [0, 8192], [[0.05, 0.09], [0.4, 0.6]])))}, _estimate("p.json"), 2, ("p.json", "sizes")),
    ReaderAttack("profile-dir-deep", {"d/p.json": b"[" * 100_000 + b"]" * 100_000, "d/ok.json": _PROFILE_BYTES},
                 (*_ESTIMATE, "{dir}/d"), 0, ("NVIDIA H200 on vm",)),  # not a profile: skipped, as documented
    ReaderAttack("profile-dir-latin1", {"d/p.json": _PROFILE_BYTES.replace(b'"host": "vm"', b'"host": "v\xe9m"')},
                 (*_ESTIMATE, "{dir}/d"), 0, ('"source": "roofline"',)),
    ReaderAttack("profile-bin-ls", {}, (*_ESTIMATE, "/bin/ls"), 2, ("/bin/ls", "binary")),
    # CSV tables
    ReaderAttack("csv-latin1", {"t.csv": EXAMPLE_CSV.read_bytes().replace(b"(made up)", b"(made \xe9p)")},
                 _estimate("t.csv"), 2, ("t.csv", "not UTF-8")),
    ReaderAttack("csv-binary", {"t.csv": CSV_HEADER.encode() + bytes(range(256))}, _estimate("t.csv"), 2,
                 ("t.csv", "binary")),
    ReaderAttack("csv-seconds-nan", {"t.csv": _csv_with("H200-SXM,1,llama-3.1-8b,bf16,bf16,decode,,16,1024,nan,x\n")},
                 _estimate("t.csv"), 2, ("t.csv", "seconds")),
    ReaderAttack("csv-batch-1e308", {"t.csv": _csv_with("H200-SXM,1,llama-3.1-8b,bf16,bf16,decode,,1e308,1024,1,x\n")},
                 _estimate("t.csv"), 2, ("t.csv", "batch")),
    ReaderAttack("csv-sparse-1.3MB", {"t.csv": sparse_csv(22_000)}, _estimate("t.csv"), 2,
                 ("t.csv", "22000 x 22000", "points")),
]

# --- traces ---------------------------------------------------------------------------------------------------

_LINE = '{"timestamp": 0, "input_length": 1024, "output_length": 64, "hit_rate": 0.5}\n'


def _trace(bad: str) -> dict[str, bytes]:
    return {"t.jsonl": (_LINE + bad + "\n" + _LINE.replace('"timestamp": 0', '"timestamp": 10')).encode()}


_FIT = ("workload", "fit", "{dir}/t.jsonl")
_SIM = ("simulate", "{dir}/micro.yaml", "{dir}/plan.json", "--trace", "{dir}/t.jsonl", "--requests", "50")

_TRACE_BAD = [
    ("input-inf", '{"timestamp": 1, "input_length": Infinity, "output_length": 64, "hit_rate": 0.5}', "Infinity"),
    ("input-nan", '{"timestamp": 1, "input_length": NaN, "output_length": 64, "hit_rate": 0.5}', "NaN"),
    ("input-1e308", '{"timestamp": 1, "input_length": 1e308, "output_length": 64, "hit_rate": 0.5}', "input_length"),
    ("output-1e300", '{"timestamp": 1, "input_length": 1024, "output_length": 1e300, "hit_rate": 0.5}',
     "output_length"),
    ("output-inf", '{"timestamp": 1, "input_length": 1024, "output_length": Infinity, "hit_rate": 0.5}',
     "Infinity"),
    ("timestamp-nan", '{"timestamp": NaN, "input_length": 1024, "output_length": 64, "hit_rate": 0.5}', "NaN"),
    ("timestamp-inf", '{"timestamp": Infinity, "input_length": 1024, "output_length": 64, "hit_rate": 0.5}',
     "Infinity"),
    ("timestamp-1e308", '{"timestamp": 1e308, "input_length": 1024, "output_length": 64, "hit_rate": 0.5}',
     "timestamp"),
    ("hit-nan", '{"timestamp": 1, "input_length": 1024, "output_length": 64, "hit_rate": NaN}', "NaN"),
    ("hit-2", '{"timestamp": 1, "input_length": 1024, "output_length": 64, "hit_rate": 2}', "hit_rate"),
    ("log-arrival-1e308", '{"arrival_unix_s": 1e308, "input_tokens": 1024, "output_tokens": 64}', "arrival_unix_s"),
    ("log-tokens-1e300", '{"arrival_unix_s": 1, "input_tokens": 1e300, "output_tokens": 64}', "input_length"),
    ("line-5MiB", '{"timestamp": 1, "input_length": 1024, "output_length": 64, "hash_ids": [' + "1," * 2_600_000
     + '1]}', "longer than 4 MiB"),
]

TRACE_ATTACKS = [
    ReaderAttack(f"trace-{name}-{face}", _trace(bad), command, 2, ("t.jsonl", "line 2", field_), kind="trace")
    for name, bad, field_ in _TRACE_BAD for face, command in (("fit", _FIT), ("simulate", _SIM))
]

# --- checkpoints ----------------------------------------------------------------------------------------------

CONFIG = {"model_type": "llama", "vocab_size": 160, "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
          "hidden_act": "silu", "rope_theta": 10000.0, "tie_word_embeddings": False}
SHARD = "model-00001-of-00001.safetensors"


def _safetensors() -> bytes:
    header = b'{"__metadata__": {"format": "pt"}}'
    return len(header).to_bytes(8, "little") + header


def _tokenizer_json() -> bytes:
    from tokenizers import Tokenizer, models

    return Tokenizer(models.WordLevel({"a": 0, "b": 1, "<unk>": 2}, unk_token="<unk>")).to_str().encode()


def checkpoint_files(**replace: bytes) -> dict[str, bytes]:
    """A tiny Hugging Face-format directory ``m/`` (config, one indexed shard, tokenizer) with files replaced."""
    files = {"config.json": _json_bytes(CONFIG),
             "model.safetensors.index.json": _json_bytes({"metadata": {}, "weight_map": {
                 "model.embed_tokens.weight": SHARD}}),
             SHARD: _safetensors(), "tokenizer.json": _tokenizer_json(),
             "tokenizer_config.json": _json_bytes({"eos_token": "b"})}
    files.update(replace)
    return {f"m/{name}": content for name, content in files.items() if content is not None}


_DRY = ("deploy", "{dir}/plan.json", "--dry-run", "--model-dir", "{dir}/m")
_DEEP = b"[" * 100_000 + b"]" * 100_000
_DEEP_OBJ = b'{"a": ' * 100_000 + b"1" + b"}" * 100_000


def _config(**changes) -> bytes:
    return _json_bytes({**CONFIG, **changes})


def _index(*names: str) -> bytes:
    return _json_bytes({"weight_map": {f"w{i}": name for i, name in enumerate(names)}})


def checkpoint_attacks() -> list[ReaderAttack]:
    """Built on demand (the tokenizer file needs the ``tokenizers`` library)."""
    cases = [
        ("layers-1e6", {"config.json": _config(num_hidden_layers=1_000_000)}, ("num_hidden_layers", "1000000")),
        ("vocab-1e12", {"config.json": _config(vocab_size=10**12)}, ("vocab_size", "1000000000000")),
        ("hidden-1e9", {"config.json": _config(hidden_size=10**9)}, ("hidden_size",)),
        ("layers-float", {"config.json": _config(num_hidden_layers=2.5)}, ("num_hidden_layers", "2.5")),
        ("config-deep", {"config.json": _DEEP_OBJ}, ("config.json", "nested")),
        ("config-list", {"config.json": b"[1, 2]"}, ("config.json", "object")),
        ("config-latin1", {"config.json": _config(model_type="llama").replace(b"silu", b"sil\xe9")},
         ("config.json", "not UTF-8")),
        ("config-nan", {"config.json": _config().replace(b"1e-06", b"NaN")}, ("config.json", "NaN")),
        ("eps-dict", {"config.json": _config(rms_norm_eps={})}, ("rms_norm_eps",)),
        ("theta-string", {"config.json": _config(rope_theta="x")}, ("rope_theta",)),
        ("rope-scaling-list", {"config.json": _config(rope_scaling=[1, 2])}, ("rope_scaling",)),
        ("index-deep", {"model.safetensors.index.json": _DEEP}, ("index.json", "nested")),
        ("index-list", {"model.safetensors.index.json": b"[]"}, ("index.json", "object")),
        ("index-number-shard", {"model.safetensors.index.json": _json_bytes({"weight_map": {"w": 5}})},
         ("index.json", "weight_map")),
        ("index-passwd", {"model.safetensors.index.json": _index("../../../../../../etc/passwd")},
         ("index.json", "outside the model directory")),
        ("index-absolute", {"model.safetensors.index.json": _index("/etc/hostname")},
         ("index.json", "outside the model directory")),
        ("index-absent-outside", {"model.safetensors.index.json": _index("/no/such/file")},
         ("index.json", "outside the model directory")),
        ("tokcfg-deep", {"tokenizer_config.json": _DEEP}, ("tokenizer_config.json", "nested")),
        ("tokcfg-list", {"tokenizer_config.json": b"[1]"}, ("tokenizer_config.json", "object")),
        ("tokcfg-template-number", {"tokenizer_config.json": b'{"chat_template": [{"name": "default", '
                                                             b'"template": 5}], "eos_token": 7}'}, None),
        ("genconfig-eos-dict", {"generation_config.json": b'{"eos_token_id": {"a": 1}}'},
         ("generation_config.json", "eos_token_id")),
    ]
    out = []
    for name, replace, names in cases:
        ok = names is None
        out.append(ReaderAttack(f"checkpoint-{name}", checkpoint_files(**replace), _DRY, 0 if ok else 2,
                                names or (), kind="checkpoint"))
    return out
