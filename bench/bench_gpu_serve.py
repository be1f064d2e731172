"""Serving benchmark for a GPU: a 1B/8B-class dense model with random weights through `placer deploy`.

    python bench/bench_gpu_serve.py [--model llama-3.2-1b|llama-3.1-8b] [--loads 1,4,16] [--requests 16]
        [--input 512] [--output 128] [--backends triton,torch] [--json OUT]
    python bench/bench_gpu_serve.py --tiny            # the same path on the CPU in about a minute

What runs, per backend: a Hugging Face-format checkpoint with the catalog model's shape and random
weights (written once under --work-dir: config.json, model.safetensors, a small tokenizer.json),
a plan with one P and one D instance of the chip in one datacenter (pipeline P-D: the engine,
not the WAN, is what is measured), `placer deploy PLAN --model-dir DIR --backend B --device D`
as a child process (local Ray; both instances share the GPU, `num_gpus` 0.5 each), and clients
streaming `POST /v1/completions` (token-id prompts, `ignore_eos`) at each load (= concurrent
clients). Measured at the client: output tokens/s over the load's wall time, TTFT (request sent →
first token event) and TPOT ((last − first token) / (n − 1)), P50 and P90.

Floor: `transformers` generate on the same checkpoint (bf16 on CUDA, fp32 on CPU), a batch of
`load` prompts: TTFT = time of a 1-token generate, TPOT = (T(output) − T(1)) / (output − 1),
throughput = load × output / T(output).

Model: `placer estimate --model M --chip CHIP --tp 1 --input I --output O --batch LOAD --json
--profiles docs/profiles` (the profiled H200) for each load: its `ttft_s` and `decode_step_s`
beside the measured TTFT and TPOT of the Triton
backend (ratio predicted / measured). With --tiny (a CPU run of a model that is not in the
catalog) the estimate is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {  # catalog model → HF config fields (placer/catalog/models.csv)
    "llama-3.2-1b": dict(num_hidden_layers=16, hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=64, intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True),
    "llama-3.1-8b": dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=128, intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False),
    "tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 intermediate_size=128, vocab_size=512, tie_word_embeddings=False),
}


def write_checkpoint(model: str, out: Path, dtype: str) -> Path:
    """A Llama-architecture checkpoint with the model's shape and seeded random weights (once per shape)."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers

    from executor.engine.config import ModelConfig
    from executor.engine.model import init_weights, torch_dtype

    if (out / "model.safetensors").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    s = SHAPES[model]
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
              "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "bos_token_id": 0, "eos_token_id": 1,
              "max_position_embeddings": 8192, "torch_dtype": dtype, **s}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mc = ModelConfig(vocab_size=s["vocab_size"], num_layers=s["num_hidden_layers"], hidden_size=s["hidden_size"],
                     num_q_heads=s["num_attention_heads"], num_kv_heads=s["num_key_value_heads"],
                     head_dim=s["head_dim"], intermediate_size=s["intermediate_size"],
                     tie_word_embeddings=s["tie_word_embeddings"], dtype=dtype)
    with torch.no_grad():
        weights = {k: v.to(torch_dtype(dtype)).contiguous() for k, v in init_weights(mc, seed=0).items()}
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    vocab = {"<bos>": 0, "<eos>": 1, **{f"w{i}": i + 2 for i in range(254)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(out / "tokenizer.json"))
    return out


def write_plan(path: Path, chip: str) -> Path:
    path.write_text(json.dumps({
        "scenario": "gpu-serve-bench",
        "pools": [{"role": "P", "datacenter": "dc-a", "chip": chip, "tp": 1, "count": 1},
                  {"role": "D", "datacenter": "dc-a", "chip": chip, "tp": 1, "count": 1}],
        "routes": [{"request_class": "all", "pipeline": "P-D", "src": "dc-a", "dst": "dc-a", "rps": 1.0}]}))
    return path


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _stream_one(client, url: str, prompt: list[int], output: int) -> dict:
    t0 = time.perf_counter()
    stamps = []
    body = {"prompt": prompt, "max_tokens": output, "stream": True, "ignore_eos": True}
    with client.stream("POST", f"{url}/v1/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: {") and '"token_ids":[' in line and '"token_ids":[]' not in line:
                stamps.append(time.perf_counter())
    n = len(stamps)
    return {"tokens": n, "ttft_s": stamps[0] - t0 if n else float("nan"),
            "tpot_s": (stamps[-1] - stamps[0]) / (n - 1) if n > 1 else float("nan")}


def drive(url: str, load: int, requests: int, input_tokens: int, output: int, seed: int) -> dict:
    """`requests` streamed completions from `load` concurrent clients: throughput, TTFT and TPOT."""
    import httpx

    rng = random.Random(seed)
    prompts = [[rng.randrange(2, 256) for _ in range(input_tokens)] for _ in range(requests)]
    results: list[dict] = []
    lock = threading.Lock()

    def client_loop() -> None:
        with httpx.Client() as client:
            while True:
                with lock:
                    if not prompts:
                        return
                    prompt = prompts.pop()
                res = _stream_one(client, url, prompt, output)
                with lock:
                    results.append(res)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(load)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft, tpot = [r["ttft_s"] for r in results], [r["tpot_s"] for r in results]
    return {"load": load, "requests": len(results), "output_tok_per_s": sum(r["tokens"] for r in results) / wall,
            "ttft_p50_s": _pct(ttft, 0.5), "ttft_p90_s": _pct(ttft, 0.9),
            "tpot_p50_s": _pct(tpot, 0.5), "tpot_p90_s": _pct(tpot, 0.9)}


def serve_and_measure(args, plan: Path, model_dir: Path, backend: str) -> list[dict]:
    """`placer deploy` with `backend` as a child process; every load driven against it; then stopped."""
    import httpx

    port = args.port
    cmd = [sys.executable, "-m", "placer.cli", "deploy", str(plan), "--model-dir", str(model_dir), "--backend",
           backend, "--device", args.device, "--port", str(port), "--block-size", "16", "--num-blocks",
           str(args.num_blocks)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    log = open(Path(args.work_dir) / f"deploy-{backend}.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + args.start_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"placer deploy exited with {proc.returncode}; see {log.name}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"placer deploy not serving after {args.start_timeout_s} s; see {log.name}")
            time.sleep(1.0)
        drive(url, 1, 1, args.input, 4, seed=99)  # warm-up: compile the kernels once
        return [drive(url, load, max(load, args.requests), args.input, args.output, seed=load) for load in args.loads]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def transformers_floor(args, model_dir: Path) -> list[dict]:
    """transformers' generate on the same checkpoint, a batch of `load` prompts per load."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(args.device).eval()
    model.generation_config.eos_token_id = None
    rows = []
    for load in args.loads:
        ids = torch.randint(2, 256, (load, args.input), device=args.device)

        def run(n: int) -> float:
            if args.device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=1)
            if args.device == "cuda":
                torch.cuda.synchronize()
            return time.perf_counter() - t0

        run(2)  # warm-up
        t1, tn = run(1), run(args.output)
        rows.append({"load": load, "output_tok_per_s": load * args.output / tn, "ttft_p50_s": t1,
                     "tpot_p50_s": (tn - t1) / max(1, args.output - 1)})
    return rows


def estimates(args) -> list[dict]:
    """`placer estimate` for the model on the chip at each load (None with --tiny)."""
    if args.tiny:
        return []
    rows = []
    for load in args.loads:
        cmd = [sys.executable, "-m", "placer.cli", "estimate", "--model", args.model, "--chip", args.chip, "--tp", "1",
               "--input", str(args.input), "--output", str(args.output), "--hit", "0", "--batch", str(load), "--json"]
        if (ROOT / "docs" / "profiles").is_dir():  # the measured H200 profile calibrates the estimate
            cmd += ["--profiles", str(ROOT / "docs" / "profiles")]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        est = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()[-300:]}
        rows.append({"load": load, **{k: est.get(k) for k in ("ttft_s", "decode_step_s", "decode_tokens_per_s",
                                                              "source", "error") if k in est}})
    return rows


def report(results: dict) -> None:
    print(f"\n{'setup':<16} {'load':>4} {'out tok/s':>10} {'TTFT p50':>9} {'TTFT p90':>9} "
          f"{'TPOT p50':>9} {'TPOT p90':>9}")
    for name, rows in results["measured"].items():
        for r in rows:
            print(f"{name:<16} {r['load']:>4} {r['output_tok_per_s']:>10.1f} {1e3 * r['ttft_p50_s']:>7.1f}ms "
                  f"{1e3 * r.get('ttft_p90_s', float('nan')):>7.1f}ms {1e3 * r['tpot_p50_s']:>7.2f}ms "
                  f"{1e3 * r.get('tpot_p90_s', float('nan')):>7.2f}ms")
    tri = {r["load"]: r for r in results["measured"].get("deploy-triton", [])}
    for e in results["estimate"]:
        m = tri.get(e["load"])
        if m is None or e.get("ttft_s") is None:
            print(f"estimate load {e['load']}: {e}")
            continue
        print(f"estimate vs triton, load {e['load']}: TTFT {1e3 * e['ttft_s']:.1f} ms predicted / "
              f"{1e3 * m['ttft_p50_s']:.1f} ms measured ({e['ttft_s'] / m['ttft_p50_s']:.2f}x); TPOT "
              f"{1e3 * e['decode_step_s']:.2f} / {1e3 * m['tpot_p50_s']:.2f} ms "
              f"({e['decode_step_s'] / m['tpot_p50_s']:.2f}x); source {e.get('source')}")


NEEDS = ("torch", "safetensors", "tokenizers", "transformers", "ray", "fastapi", "uvicorn", "httpx", "typer",
         "pydantic", "pytest")


def missing_modules() -> list[str]:
    """What this benchmark (and `placer deploy`) needs but this Python lacks."""
    import importlib.util

    return [m for m in NEEDS if importlib.util.find_spec(m) is None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-3.2-1b", choices=[m for m in SHAPES if m != "tiny"])
    ap.add_argument("--chip", default="H200-SXM")
    ap.add_argument("--tiny", action="store_true", help="a tiny model on the CPU: checks the path, not the GPU")
    ap.add_argument("--loads", default="1,4,16", help="concurrent clients, comma-separated")
    ap.add_argument("--requests", type=int, default=16, help="requests per load (at least the load)")
    ap.add_argument("--input", type=int, default=512)
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--backends", default="triton,torch")
    ap.add_argument("--num-blocks", type=int, default=4096)
    ap.add_argument("--port", type=int, default=8137)
    ap.add_argument("--start-timeout-s", type=float, default=300)
    ap.add_argument("--work-dir", default=None, help="checkpoint and logs (default: a temp dir)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--check-deps", action="store_true", help="print the missing modules (nothing if none), exit")
    args = ap.parse_args(argv)
    if args.check_deps or missing_modules():
        if missing_modules():
            print("missing Python modules: " + ", ".join(missing_modules()))
        return 0 if args.check_deps else 2
    args.loads = [int(x) for x in args.loads.split(",")]
    if args.tiny:
        args.input, args.output, args.requests, args.num_blocks = min(args.input, 32), min(args.output, 16), 4, 256
        args.loads = [x for x in args.loads if x <= 4] or [1]
    args.device = "cpu" if args.tiny else "cuda"
    args.work_dir = args.work_dir or tempfile.mkdtemp(prefix="gpu-serve-")
    shape = "tiny" if args.tiny else args.model
    dtype = "float32" if args.tiny else "bfloat16"
    model_dir = write_checkpoint(shape, Path(args.work_dir) / f"ckpt-{shape}", dtype)
    plan = write_plan(Path(args.work_dir) / "plan.json", args.chip)
    results: dict = {"model": shape, "chip": args.chip, "device": args.device, "input": args.input,
                     "output": args.output, "loads": args.loads, "date_unix_s": time.time(), "measured": {}}
    for backend in args.backends.split(","):
        if args.tiny and backend == "triton":
            continue  # Triton's CPU interpreter measures nothing useful
        results["measured"][f"deploy-{backend}"] = serve_and_measure(args, plan, model_dir, backend)
    results["measured"]["transformers"] = transformers_floor(args, model_dir)
    results["estimate"] = estimates(args)
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
