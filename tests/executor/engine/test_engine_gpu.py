"""The engine's invariants on a CUDA device with the triton backend (marker `gpu`)."""

import pytest
import torch

from executor.engine import KVPayload, ModelConfig, SamplingParams

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

NO_EOS = SamplingParams(max_new_tokens=64, stop_at_eos=False)


@pytest.fixture
def gpu_engine(make_engine):
    def make(**kw):
        return make_engine(backend="triton", dev="cuda", **kw)

    return make


def _decode(engine, req, steps):
    return [engine.decode_step([req])[0] for _ in range(steps)]


def test_cuda_extend_equals_decode_steps(gpu_engine, prompt):
    stepper, extender = gpu_engine(), gpu_engine()
    a = stepper.prefill(prompt, NO_EOS).request
    b = extender.prefill(prompt, NO_EOS).request
    stepped = _decode(stepper, a, 6)
    assert extender.extend(b, stepped[:-1]).next_token == stepped[-1]
    ka, kb = stepper.export_kv(a, 0, a.num_kv_tokens), extender.export_kv(b, 0, b.num_kv_tokens)
    torch.testing.assert_close(kb.k, ka.k, rtol=1e-3, atol=1e-3)
    assert _decode(stepper, a, 5) == _decode(extender, b, 5)


def test_cuda_cached_prefix_equals_scratch(gpu_engine, prompt):
    warm, cold = gpu_engine(), gpu_engine()
    warm.finish(warm.prefill([*prompt[:17], 7, 7, 7], NO_EOS).request)
    hit, miss = warm.prefill(prompt, NO_EOS), cold.prefill(prompt, NO_EOS)
    assert hit.num_cached_tokens == 16 and hit.first_token == miss.first_token
    torch.testing.assert_close(
        warm.export_kv(hit.request, 0, 23).v, cold.export_kv(miss.request, 0, 23).v, rtol=1e-3, atol=1e-3
    )
    assert _decode(warm, hit.request, 8) == _decode(cold, miss.request, 8)


def test_kv_from_gpu_continues_on_cpu(gpu_engine, make_engine, prompt):
    """A heterogeneous hand-over: KV made on the GPU (triton) decodes on the CPU (torch)."""
    p, d = gpu_engine(), make_engine()
    pre = p.prefill(prompt, NO_EOS)
    payload = KVPayload.from_bytes(p.export_kv(pre.request, 0, len(prompt)).to_bytes())
    req = d.import_kv([*prompt, pre.first_token], payload, NO_EOS)
    assert _decode(d, req, 6) == _decode(p, pre.request, 6)


def test_cuda_batched_serving_matches_single_requests(gpu_engine, prompt):
    params = SamplingParams(max_new_tokens=12, stop_at_eos=False)
    prompts = [prompt, prompt[:11], [256, *b"jumps over"], prompt[:16] + [3, 4]]
    served = gpu_engine(num_blocks=14, max_running_requests=3).generate_batch(prompts, params)
    alone = gpu_engine()
    assert served == [alone.generate(p, 12, params) for p in prompts]


def test_cuda_bfloat16_kv_matches_torch_backend(make_engine, model_config, prompt):
    cfg = ModelConfig(**{**model_config.to_dict(), "dtype": "bfloat16"})
    tri = make_engine(model=cfg, backend="triton", dev="cuda")
    ref = make_engine(model=cfg, backend="torch", dev="cuda")
    a, b = tri.prefill(prompt, NO_EOS), ref.prefill(prompt, NO_EOS)
    ka, kb = tri.export_kv(a.request, 0, 23), ref.export_kv(b.request, 0, 23)
    assert ka.k.dtype == torch.bfloat16
    torch.testing.assert_close(ka.v.float(), kb.v.float(), rtol=5e-2, atol=5e-2)
    assert len(tri.generate(prompt, 16, NO_EOS)) == 16
