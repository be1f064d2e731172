"""Soak the executor: a bounded stream of requests while instances are killed and restarted at random.

In-process deployment (fake channel, a worker thread per instance, real heartbeats):
2 P and 2 RLD in dc-a, 3 MD in dc-b, the tiny seeded model. Client threads submit
greedy requests from a fixed set whose fault-free outputs are computed first; a
chaos thread kills a random instance every `--kill-every-s` (with or without telling
the router) and restarts it under the same name a moment later. At the end it waits
for every request (each has a deadline) and prints:

  sent       requests accepted by the router
  rejected   refused at admission (503/429: no instance up for a role)
  completed  ended with a completion
  errored    ended with a clear error event (e.g. RLD died after the first token)
  lost       neither, by the end (must be 0)
  duplicated tokens  an output index the client saw twice (must be 0)
  mismatched completions that differ from the fault-free output (must be 0)

Exit status 1 if lost, duplicated or mismatched is not 0.
Usage: python bench/soak_executor.py --seconds 30 [--clients 4] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="how long requests are sent (the drain is extra)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--kill-every-s", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import logging

    import torch

    torch.set_num_threads(1)
    logging.getLogger("executor").setLevel(logging.ERROR)  # kills make transfers fail: expected here
    from executor.cluster import LocalCluster
    from executor.config import ServingConfig
    from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams
    from executor.health import HealthMonitor
    from executor.placement import InstanceSpec
    from executor.routing import NoRouteError, RoutingPolicy
    from placer.pdd import FilterRule

    mc = ModelConfig(num_layers=2, hidden_size=64, num_q_heads=4, num_kv_heads=2, head_dim=16,
                     intermediate_size=128)
    ec = EngineConfig(backend="torch", block_size=4, num_blocks=1024)
    rng = random.Random(args.seed)
    prompts = [[256, *f"{k} soak prompt {'x' * (k % 5)} over the lazy dog".encode()] for k in range(12)]
    budgets = [6, 16, 32]
    ref_engine = Engine.from_seed(mc, ec, seed=0, device="cpu")
    reference = {(k, n): ref_engine.generate(p, n, SamplingParams(max_new_tokens=n, stop_at_eos=False))
                 for k, p in enumerate(prompts) for n in budgets}
    specs = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("p1", "P", "dc-a", "A"),
             InstanceSpec("rld0", "RLD", "dc-a", "A"), InstanceSpec("rld1", "RLD", "dc-a", "A"),
             InstanceSpec("md0", "MD", "dc-b", "B"), InstanceSpec("md1", "MD", "dc-b", "B"),
             InstanceSpec("md2", "MD", "dc-b", "B")]
    policy = RoutingPolicy(direct_min_hit_rate=0.6, filter_rule=FilterRule(1, 0.3, 8))  # all three pipelines in the mix
    config = ServingConfig(routing=policy, heartbeat_s=0.05, stall_s=2.0, request_timeout_s=20.0)
    c = LocalCluster(specs, mc, ec, config, transport="fake", threads=True,
                     health=HealthMonitor(interval_s=0.05, suspect_after=2, down_after=3))
    counts: Counter[str] = Counter()
    streams: list[tuple[tuple[int, int], object]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(cid: int) -> None:
        r = random.Random(args.seed * 1000 + cid)
        while not stop.is_set():
            key = (r.randrange(len(prompts)), r.choice(budgets))
            try:
                s = c.router.submit(prompts[key[0]], SamplingParams(max_new_tokens=key[1], stop_at_eos=False))
            except NoRouteError:
                with lock:
                    counts["rejected"] += 1
                time.sleep(0.05)
                continue
            with lock:
                counts["sent"] += 1
                streams.append((key, s))
            s.closed.wait(30)

    def chaos() -> None:
        while not stop.wait(args.kill_every_s * (0.5 + rng.random())):
            name = rng.choice(sorted(c.instances))
            role = c.instances[name].spec.role
            if sum(i.spec.role == role for i in c.instances.values()) < 2:
                continue  # keep one of each role: faults, not an outage
            c.kill(name, tell_router=rng.random() < 0.5)
            counts["kills"] += 1
            if stop.wait(0.3 + 0.7 * rng.random()):
                break
            c.restart(name)
            counts["restarts"] += 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(args.clients)]
    threads.append(threading.Thread(target=chaos, daemon=True))
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join(60)
    dup = mismatched = 0
    for key, s in streams:
        if not s.closed.wait(max(0.0, 30 - (time.monotonic() - t0 - args.seconds))):
            counts["lost"] += 1
            continue
        evs = list(s._q.queue)  # the client's events, in the order it got them
        idx = [e.index for e in evs if e.kind == "token"]
        dup += len(idx) - len(set(idx))
        if s.error is None:
            counts["completed"] += 1
            mismatched += s.tokens != reference[key]
        else:
            counts["errored"] += 1
            mismatched += s.tokens != reference[key][: len(s.tokens)]  # what was shown is still a true prefix
    stats = c.router.stats()
    c.close()
    print(f"soak {args.seconds:g} s, {args.clients} clients, kills {counts['kills']}, "
          f"restarts {counts['restarts']}, wall {time.monotonic() - t0:.1f} s")
    print(f"sent {counts['sent']}")
    print(f"rejected {counts['rejected']}")
    print(f"completed {counts['completed']}")
    print(f"errored {counts['errored']}")
    print(f"lost {counts['lost']}")
    print(f"duplicated tokens {dup}")
    print(f"mismatched {mismatched}")
    print("router: " + ", ".join(f"{k} {stats.get(k, 0)}" for k in (
        "migrations", "fallbacks", "retries", "failures_after_first_token", "stalls", "peers_down",
        "peers_recovered", "restarts_seen")))
    return 1 if counts["lost"] or dup or mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
