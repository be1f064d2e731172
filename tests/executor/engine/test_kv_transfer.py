"""KV export / import between engines, and the payload's wire format."""

import ctypes
import json

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from executor.engine import KVPayload, KVPayloadError, ModelConfig, PrefixMissingError, SamplingParams

NO_EOS = SamplingParams(max_new_tokens=64, stop_at_eos=False)


def _decode(engine, req, steps):
    return [engine.decode_step([req])[0] for _ in range(steps)]


def test_imported_kv_continues_the_same_sequence(make_engine, prompt):
    p, d = make_engine(), make_engine()
    d.finish(d.prefill([9] * 12, NO_EOS).request)  # d's pool is in a different state
    pre = p.prefill(prompt, NO_EOS)
    payload = KVPayload.from_bytes(p.export_kv(pre.request, 0, len(prompt)).to_bytes())
    req = d.import_kv([*prompt, pre.first_token], payload, NO_EOS)
    assert req.block_ids != list(pre.block_ids)  # lives in other blocks there
    assert req.output_ids == [pre.first_token]
    assert _decode(d, req, 12) == _decode(p, pre.request, 12)


def test_pdd_relay_handoff_with_extend_decode(make_engine, prompt):
    """P ships the prompt's KV; RLD decodes eagerly; MD catches up from RLD's token ids."""
    p, rld, md = make_engine(), make_engine(), make_engine()
    pre = p.prefill(prompt, NO_EOS)
    payload = p.export_kv(pre.request, 0, len(prompt))
    seq = [*prompt, pre.first_token]
    relay = rld.import_kv(seq, payload, NO_EOS)
    eager = _decode(rld, relay, 7)  # t1..t7
    main = md.import_kv(seq, payload, NO_EOS)
    caught_up = md.extend(main, eager)  # one forward over t0..t7
    assert caught_up.logits.argmax(-1).tolist()[:-1] == eager  # MD agrees with every relay token
    assert caught_up.next_token == _decode(rld, relay, 1)[0]
    assert _decode(md, main, 6) == _decode(rld, relay, 6)


def test_decode_side_cache_means_only_the_uncached_tail_is_shipped(make_engine, prompt):
    p, md = make_engine(), make_engine()
    history = prompt[:16]
    md.finish(md.prefill([*history, 1], NO_EOS).request)  # an earlier turn left 16 tokens cached
    pre = p.prefill(prompt, NO_EOS)
    start = md.cached_prefix_len(prompt)
    assert start == 16
    tail = p.export_kv(pre.request, start, len(prompt))
    full = p.export_kv(pre.request, 0, len(prompt))
    assert len(tail.to_bytes()) < len(full.to_bytes()) / 2
    req = md.import_kv([*prompt, pre.first_token], tail, NO_EOS)
    assert req.num_cached_tokens == 16
    assert _decode(md, req, 8) == _decode(p, pre.request, 8)


def test_payload_past_the_cached_prefix_is_refused(make_engine, prompt):
    p, md = make_engine(), make_engine()
    pre = p.prefill(prompt, NO_EOS)
    tail = p.export_kv(pre.request, 8, len(prompt))
    with pytest.raises(PrefixMissingError, match="caches 0 tokens of the prefix but the payload starts at 8"):
        md.import_kv(prompt, tail)
    assert md.blocks.pool.num_free == md.blocks.pool.num_blocks  # the failed import left nothing behind


def test_payload_bytes_round_trip(make_engine, prompt):
    engine = make_engine()
    pre = engine.prefill(prompt, NO_EOS)
    payload = engine.export_kv(pre.request, 3, 19)
    back = KVPayload.from_bytes(payload.to_bytes())
    assert (back.start, back.end, back.token_ids, back.version) == (3, 19, tuple(prompt[3:19]), 1)
    assert torch.equal(back.k, payload.k) and torch.equal(back.v, payload.v)
    assert payload.num_bytes == 2 * 2 * 16 * 2 * 16 * 4  # k+v × layers × tokens × heads × dim × fp32


def test_a_payload_read_without_a_copy_views_the_bytes_and_imports_the_same(make_engine, prompt):
    """The decoders read a payload with copy=False: its tensors are the received bytes themselves, and the
    import continues the sequence as from a copy; by default from_bytes copies (writable tensors of its own)."""
    p, d = make_engine(), make_engine()
    pre = p.prefill(prompt, NO_EOS)
    blob = p.export_kv(pre.request, 0, len(prompt)).to_bytes()
    view, copied = KVPayload.from_bytes(blob, copy=False), KVPayload.from_bytes(blob)
    lo = ctypes.cast(ctypes.c_char_p(blob), ctypes.c_void_p).value  # where the bytes object keeps its bytes
    inside = lambda t: lo <= t.data_ptr() < lo + len(blob)
    assert inside(view.k) and inside(view.v)
    assert not inside(copied.k) and not inside(copied.v)
    assert torch.equal(view.k, copied.k) and torch.equal(view.v, copied.v)
    req = d.import_kv([*prompt, pre.first_token], view, NO_EOS)
    assert _decode(d, req, 8) == _decode(p, pre.request, 8)


def test_payload_bytes_are_safetensors_both_ways(make_engine, prompt):
    """Written here, read by safetensors; written by safetensors, read here (bf16 too)."""
    engine = make_engine()
    payload = engine.export_kv(engine.prefill(prompt, NO_EOS).request, 0, 10)
    theirs = st_load(payload.to_bytes())
    assert torch.equal(theirs["k"], payload.k) and torch.equal(theirs["v"], payload.v)
    k = torch.randn(2, 3, 2, 16).to(torch.bfloat16)
    back = KVPayload.from_bytes(_blob("1", k))
    assert back.k.dtype == torch.bfloat16 and torch.equal(back.k, k) and torch.equal(back.v, k)
    again = KVPayload.from_bytes(back.to_bytes())
    assert torch.equal(again.k, k) and again.token_ids == (1, 1, 1)


def test_cut_or_lying_payload_bytes_are_rejected_by_name(make_engine, prompt):
    engine = make_engine()
    data = engine.export_kv(engine.prefill(prompt, NO_EOS).request, 0, 10).to_bytes()
    with pytest.raises(KVPayloadError, match=r"tensor 'v' ends at byte 5120 of the data, which has 5119"):
        KVPayload.from_bytes(data[:-1])  # the wire cut the last byte
    with pytest.raises(KVPayloadError, match="header length 4294967295 exceeds"):
        KVPayload.from_bytes(b"\xff\xff\xff\xff" + data[4:])
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    header["k"]["dtype"] = "F99"
    head = json.dumps(header).encode()
    with pytest.raises(KVPayloadError, match="tensor 'k' has a bad header entry"):
        KVPayload.from_bytes(len(head).to_bytes(8, "little") + head + data[8 + n :])


def _blob(version: str, k: torch.Tensor, start: int = 0) -> bytes:
    header = {"format": "placer-kv", "version": version, "start": str(start),
              "end": str(start + k.shape[1]), "token_ids": json.dumps([1] * k.shape[1])}
    return st_save({"k": k, "v": k.clone()}, metadata=header)


def test_payload_of_another_version_or_format_is_rejected():
    k = torch.zeros(2, 3, 2, 16)
    with pytest.raises(KVPayloadError, match="unsupported KV payload version 2"):
        KVPayload.from_bytes(_blob("2", k))
    with pytest.raises(KVPayloadError, match="unsupported KV payload version 7"):
        KVPayload(start=0, end=3, token_ids=(1, 1, 1), k=k, v=k, version=7)
    with pytest.raises(KVPayloadError, match="not a KV payload"):
        KVPayload.from_bytes(st_save({"k": k}, metadata={"format": "other"}))
    with pytest.raises(KVPayloadError):
        KVPayload.from_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00garbage")


def test_payload_that_disagrees_with_its_header_is_rejected():
    k = torch.zeros(2, 3, 2, 16)
    header = {"format": "placer-kv", "version": "1", "start": "0", "end": "5", "token_ids": "[1, 1, 1, 1, 1]"}
    with pytest.raises(KVPayloadError, match=r"k must be \[num_layers, 5, kv_heads, head_dim\]"):
        KVPayload.from_bytes(st_save({"k": k, "v": k.clone()}, metadata=header))


def test_payload_of_the_wrong_shape_or_tokens_does_not_import(make_engine, prompt):
    engine = make_engine()
    bigger = make_engine(model=ModelConfig(num_layers=3))
    pre = bigger.prefill(prompt, NO_EOS)
    foreign = bigger.export_kv(pre.request, 0, len(prompt))
    with pytest.raises(KVPayloadError, match=r"shape \(3, 23, 2, 16\) does not fit this engine.*num_layers=2"):
        engine.import_kv(prompt, foreign)
    own = engine.export_kv(engine.prefill(prompt, NO_EOS).request, 0, 8)
    with pytest.raises(KVPayloadError, match="do not match the given token ids"):
        engine.import_kv([0] * 8, own)
    with pytest.raises(ValueError, match="belongs to another engine"):
        engine.export_kv(pre.request, 0, len(prompt))
    with pytest.raises(ValueError, match="export range"):
        bigger.export_kv(pre.request, 0, len(prompt) + 1)  # the first token has no KV yet
