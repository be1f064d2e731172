"""The runner on the triton backend gives the torch backend's greedy tokens.

On a machine without CUDA the kernels run in Triton's interpreter
(TRITON_INTERPRET=1, set in conftest.py), so this stays small.
"""

import torch

from executor.engine import SamplingParams

NO_EOS = SamplingParams(max_new_tokens=64, stop_at_eos=False)


def _trace(engine, prompt):
    """Greedy tokens through all three batch kinds: PREFILL, EXTEND (cached prefix), DECODE."""
    first = engine.prefill(prompt, NO_EOS)
    second = engine.prefill([*prompt[:8], 5, 6, 7], NO_EOS)  # 8 cached tokens → extend attention
    out = [first.first_token, second.first_token]
    for _ in range(3):
        out += engine.decode_step([first.request, second.request])
    return out, second.num_cached_tokens


def test_triton_backend_matches_torch_greedy_tokens(make_engine, prompt):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    prompt = prompt[:12]
    want, _ = _trace(make_engine(backend="torch", dev=dev), prompt)
    engine = make_engine(backend="triton", dev=dev)
    assert engine.model.ops.backend == "triton"
    got, cached = _trace(engine, prompt)
    assert cached == 8
    assert got == want
