"""``placer bench`` against an OpenAI-compatible server that is neither ours nor written for the test:
``transformers serve`` (Hugging Face's, in the dev extra) over a tiny local checkpoint, started as its
user would start it, over real HTTP.

It differs from our executor where real servers do: it refuses the fields that pin an output length
(``min_tokens``, ``ignore_eos``: 422 "Unexpected fields"), its stream may carry several tokens in one
chunk, and its token counts come only from the ``usage`` chunk. The bench must measure it anyway.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from placer.loadgen import BenchConfig, run_bench
from placer.specs import parse_scenario
from tests.placer.loadgen.support import scenario_dict


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def transformers_server(tmp_path_factory):
    pytest.importorskip("transformers.cli.serve", reason="needs the dev extra (transformers[serving])")
    from tests.executor.engine.hf_support import build_checkpoint

    exe = shutil.which("transformers", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the `transformers` command is not installed beside this interpreter")
    ckpt = build_checkpoint("llama3", tmp_path_factory.mktemp("hf") / "llama3")
    # The bench cannot pin this server's output lengths (it refuses ignore_eos), and the random tiny model
    # ends some answers at once with its EOS or emits tokens that print nothing (its other special tokens,
    # the padded vocabulary rows the tokenizer lacks); the checkpoint's own generation config suppresses
    # them, as a user would to benchmark fixed lengths, so every answer is max_tokens of visible text.
    from tests.executor.engine.hf_support import SPECIALS, VOCAB_SIZE

    silent = [*range(len(SPECIALS)), *range(150, VOCAB_SIZE)]  # the trained tokenizer has 150 ids
    gen = ckpt / "generation_config.json"
    gen.write_text(json.dumps({**json.loads(gen.read_text()), "suppress_tokens": silent}))
    port = _free_port()
    proc = subprocess.Popen([exe, "serve", str(ckpt), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("transformers serve did not answer /health within 120 s")
            time.sleep(0.5)
        yield url, str(ckpt)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_bench_measures_a_server_that_refuses_the_length_fields(transformers_server, tmp_path):
    url, model = transformers_server
    scenario = parse_scenario(scenario_dict(rate=4.0, input_tokens=48, output_tokens=8))
    log = tmp_path / "bench.jsonl"
    result = run_bench(scenario, BenchConfig(url=url, requests=10, rate_rps=4.0, seed=3, unit="word"),
                       request_log=log)
    d = result.data
    assert d["errors"] == 0, [o.error for o in result.outcomes if o.error]
    assert d["model"] == model  # named by the server's /v1/models
    assert d["exact_output_lengths"] is False  # it refused min_tokens / ignore_eos, so none were sent
    assert d["requests"] == 10 and d["achieved_rps"] > 0
    assert 0 < d["ttft_p50_s"] <= d["ttft_p90_s"] <= d["e2e_p90_s"]
    # token counts from its usage chunk (its chunks may carry several tokens): the 8 asked for
    assert all(o.output_tokens == 8 for o in result.outcomes)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 10 and all(ln["input_length"] > 0 for ln in lines)
