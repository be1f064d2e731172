"""Random but realistic scenarios from the catalog, for ``bench_agreement.py --random N`` (issue 42, part 4).

in:  a seed (one ``random.Random`` per scenario: scenario ``i`` of seed ``s`` is the same
     whatever ``N`` is)
out: :func:`random_scenario` — a scenario dict :func:`placer.specs.parse_scenario` accepts,
     with a ``kind`` tag in its name: ``mixed`` (2–8 datacenters, one or two catalog chips
     each, lines 1–100 Gbit/s, 2–10 classes of prompts up to 128K tokens, loads from a fifth
     of a rough capacity up to saturation), ``relay`` (two datacenters, a compute chip where
     prompts arrive, a cheap bandwidth-rich decode chip behind a slow line, long outputs and
     cold long prompts: the setting where relaying pays) and ``trace`` (the bundled
     2,000-request Mooncake conversation trace as the workload).

The ``arrival_rps`` written is a crude scale — the inventory's dense peak at 40 % spent on the
mix's new prompt tokens (2 × active parameters FLOPs a token); :func:`load_fraction` draws where
between a fifth of saturation and saturation the bench puts the load, once it knows the most the
plan's pools carry within the SLA (``bench.agreement_stats.at_load``).
"""

from __future__ import annotations

import random
from pathlib import Path

from placer.catalog import chip_catalog, get_model

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "tests" / "data" / "mooncake_conversation_2000.jsonl"

#: (model, weight dtype, kv dtype, tp degrees): models whose instances the ILP sizes in seconds.
MODELS = [
    ("llama-3.1-8b", "bf16", "bf16", [1, 2]),
    ("qwen3-32b", "fp8", "fp8", [1, 2, 4]),
    ("llama-3.1-70b", "fp8", "fp8", [2, 4, 8]),
    ("qwen3-235b-a22b", "fp8", "fp8", [4, 8]),
    ("deepseek-v3", "fp8", "fp8", [8, 16]),
]
#: Serving chips with fp8 where the model is fp8 (the others run bf16 models only).
FP8_CHIPS = ["H100-SXM", "H200-SXM", "H800-SXM", "H20", "L40S", "L20", "B200", "MI300X", "MI325X", "Gaudi3"]
BF16_ONLY = ["A100-80G-SXM", "A800-80G-SXM", "Ascend-910B"]
KINDS = ("mixed", "mixed", "relay", "mixed", "trace")  # drawn in turn: 3 mixed, 1 relay, 1 trace in 5


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return lo * (hi / lo) ** rng.random()


def _classes(rng: random.Random, n: int, max_input: int = 131_072) -> list[dict]:
    """``n`` classes: log-uniform prompts 256..max_input, outputs 16..4096, hits from cold to agentic."""
    weights = [rng.expovariate(1.0) + 0.05 for _ in range(n)]
    total = sum(weights)
    shares = [round(w / total, 6) for w in weights]
    shares[0] = round(1.0 - sum(shares[1:]), 6)
    out = []
    for i in range(n):
        hit = rng.choice([0.0, rng.uniform(0, 0.6), rng.uniform(0.6, 0.95), rng.uniform(0.95, 0.998)])
        out.append({"name": f"c{i}", "share": shares[i], "input_tokens": int(_log_uniform(rng, 256, max_input)),
                    "output_tokens": int(_log_uniform(rng, 16, 4096)), "hit_rate": round(hit, 4)})
    return out


def _capacity_rps(model: str, weight_dtype: str, chips: dict[str, int], classes: list[dict]) -> float:
    """Requests/s the inventory's dense peak (40 % of it) prefills: a rough scale for the load."""
    cfg, catalog = get_model(model), chip_catalog()
    flops_per_token = 2 * cfg.params_active_b * 1e9
    peak = 0.0
    for name, n in chips.items():
        chip = catalog[name]
        rate = chip.fp8_tflops if weight_dtype == "fp8" and chip.fp8_tflops else chip.bf16_tflops
        peak += n * rate * 1e12 * 0.4
    new_tokens = sum(c["share"] * max(1.0, (1 - c["hit_rate"]) * c["input_tokens"]) for c in classes)
    return peak / flops_per_token / new_tokens


def _mixed(rng: random.Random, name: str) -> dict:
    model, wdt, kdt, tps = rng.choice(MODELS)
    pool = FP8_CHIPS if wdt == "fp8" else FP8_CHIPS + BF16_ONLY
    n_dc = rng.randint(2, 8)
    per_chip = max(tps) * rng.choice([2, 4, 8])
    dcs = []
    for d in range(n_dc):
        chips = rng.sample(pool, rng.choice([1, 1, 2]))
        dcs.append({"name": f"dc{d}", "inventory": {c: per_chip * rng.randint(1, 3) for c in chips}})
    links = [{"src": f"dc{d}", "dst": f"dc{d + 1}"} for d in range(n_dc - 1)]  # a chain keeps every dc reachable
    extra = [(a, b) for a in range(n_dc) for b in range(a + 2, n_dc)]
    for a, b in rng.sample(extra, min(len(extra), rng.randint(0, n_dc))):
        links.append({"src": f"dc{a}", "dst": f"dc{b}"})
    for ln in links:
        ln.update(gbit_per_s=round(_log_uniform(rng, 1, 100), 1), rtt_ms=round(rng.uniform(2, 80), 1),
                  jitter_ms=round(rng.uniform(0, 5), 1))
    classes = _classes(rng, rng.randint(2, 10))
    inventory: dict[str, int] = {}
    for dc in dcs:
        for c, n in dc["inventory"].items():
            inventory[c] = inventory.get(c, 0) + n
    rps = rng.uniform(0.2, 1.0) * _capacity_rps(model, wdt, inventory, classes)
    mean_in = sum(c["share"] * c["input_tokens"] for c in classes)
    return {"name": name, "model": model, "weight_dtype": wdt, "kv_dtype": kdt, "datacenters": dcs, "links": links,
            "workload": {"arrival_rps": round(max(0.05, rps), 3), "classes": classes},
            "sla": {"ttft_p90_s": round(max(0.5, rng.uniform(0.5, 2.0) * mean_in / 8000), 2),
                    "tpot_s": rng.choice([0.03, 0.05, 0.08, 0.1])},
            "options": {"tp_degrees": tps}}


def _relay(rng: random.Random, name: str) -> dict:
    """Two datacenters: prompts arrive at a compute chip; a cheap bandwidth chip behind a slow line.

    Agentic traffic (long prompts, mostly cached, long outputs) and a few cold classes whose KV
    cannot cross the line within a tight SLA: relaying them through RelayDecode pays."""
    model, wdt, kdt, tps = rng.choice(MODELS[:3])
    src_chip = rng.choice(["H100-SXM", "H800-SXM", "H200-SXM"])
    n = max(tps) * rng.choice([2, 4])
    n_hot, n_cold = rng.randint(1, 4), rng.randint(1, 2)
    classes = _classes(rng, n_hot + n_cold, max_input=65_536)
    for i, c in enumerate(classes):
        c["input_tokens"] = int(_log_uniform(rng, 8192, 65_536) if i < n_hot else _log_uniform(rng, 4096, 24_576))
        c["output_tokens"] = int(_log_uniform(rng, 256, 2048))  # long outputs: decode is the cost
        c["hit_rate"] = round(rng.uniform(0.9, 0.995) if i < n_hot else rng.uniform(0.05, 0.6), 4)
        if i >= n_hot and rng.random() < 0.5:
            c["output_tokens"] = rng.randint(32, 200)  # short answers: the filter's traffic (P-RLD)
    cold_share = rng.uniform(0.05, 0.3)
    hot_total = sum(c["share"] for c in classes[:n_hot])
    for i, c in enumerate(classes):
        c["share"] = round(c["share"] / hot_total * (1 - cold_share), 6) if i < n_hot else \
            round(cold_share / n_cold, 6)
    classes[0]["share"] = round(1.0 - sum(c["share"] for c in classes[1:]), 6)
    return {"name": name, "model": model, "weight_dtype": wdt, "kv_dtype": kdt,
            "chips": [{"name": "H20-cheap", "base": "H20", "price_usd_per_h": round(rng.uniform(0.5, 1.0), 2)}],
            "datacenters": [{"name": "dc-a", "inventory": {src_chip: n}},
                            {"name": "dc-b", "inventory": {"H20-cheap": 4 * n}}],
            "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": round(_log_uniform(rng, 1, 25), 1),
                       "rtt_ms": round(rng.uniform(10, 60), 1), "jitter_ms": round(rng.uniform(0, 5), 1)}],
            "workload": {"arrival_rps": 10.0, "classes": classes},
            "sla": {"ttft_p90_s": round(rng.uniform(1.0, 3.0), 2), "tpot_s": rng.choice([0.03, 0.05])},
            "options": {"tp_degrees": tps, "drc": True, "filter": True, "filter_min_input_tokens": 8192}}


def _trace(rng: random.Random, name: str) -> dict:
    """The bundled Mooncake trace on two or three datacenters of fp8 chips."""
    model, wdt, kdt, tps = rng.choice(MODELS[1:3])
    n_dc = rng.randint(2, 3)
    per_chip = max(tps) * rng.choice([4, 8])
    dcs = [{"name": f"dc{d}", "inventory": {rng.choice(FP8_CHIPS[:7]): per_chip}} for d in range(n_dc)]
    links = [{"src": f"dc{d}", "dst": f"dc{d + 1}", "gbit_per_s": round(_log_uniform(rng, 5, 100), 1),
              "rtt_ms": round(rng.uniform(2, 40), 1)} for d in range(n_dc - 1)]
    return {"name": name, "model": model, "weight_dtype": wdt, "kv_dtype": kdt, "datacenters": dcs, "links": links,
            "workload": {"arrival_rps": round(rng.uniform(1.0, 8.0), 2), "trace": str(TRACE)},
            "sla": {"ttft_p90_s": round(rng.uniform(2.0, 5.0), 1), "tpot_s": 0.05},
            "options": {"tp_degrees": tps}}


def load_fraction(seed: int, index: int) -> float:
    """Where scenario ``index`` of ``seed`` loads its hardware: a share of the most it carries within the SLA."""
    return round(random.Random(seed * 1_000_003 + index + 500_000).uniform(0.2, 0.97), 3)


def random_scenario(seed: int, index: int) -> dict:
    """Scenario ``index`` of the draw ``seed``: a dict for :func:`placer.specs.parse_scenario`."""
    rng = random.Random(seed * 1_000_003 + index)
    kind = KINDS[index % len(KINDS)]
    name = f"rnd-{seed}-{index}-{kind}"
    return {"mixed": _mixed, "relay": _relay, "trace": _trace}[kind](rng, name)
