"""PDD's vocabulary and rules, defined once: the dictionary every layer reads.

in:  nothing of the project (the standard library only: tests/test_layers.py checks it)
out: the role and pipeline names, who streams a flow's first token, the SLA quantile, the
     anomalous-traffic filter rule with its default, the light/mix names of a P queue, how a pool's
     queues lie on its instances (:func:`queue_layout`, the planner's, the simulator's and the executor's
     rule) and the classes a "set" queue admits (:func:`set_queue_classes`), the
     token-ID handoff's modes with the adaptive rule, and the handoff protocol
     (:class:`CatchUpRule`, :class:`HandoffProtocol`) — the one state machine the
     executor's RLD runs and the simulator times.

The physics of a flow (KV bytes and seconds, queue laws, TTFT) is :mod:`placer.flows`; the
executor, `specs`, `plan`, `records` and `problem` need only the names and rules and import
this module, not the physics.

Roles: P (prefill), RLD (RelayDecode, next to P over RDMA), MD (MainDecode, across the
WAN), D (plain decode of the PD baselines), A (aggregated: prefills and decodes itself).
Pipelines: P-MD (high hit: go straight), P-RLD-MD (low hit: RLD decodes while the KV crawls
to MD, then hands over token IDs), P-RLD (filtered traffic only: long input, low hit, short
output finishes on RLD), P-D (the PD baselines), A (aggregated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Role = Literal["P", "RLD", "MD", "D", "A"]
ROLES: tuple[str, ...] = get_args(Role)
P, RLD, MD, D, AGG = ROLES
DECODE_ROLES = (RLD, MD, D)
#: Roles that prefill prompts: P, and A (aggregated: prefill chunks ride in its decode steps).
PREFILL_ROLES = (P, AGG)

PipelineName = Literal["P-MD", "P-RLD-MD", "P-RLD", "P-D", "A"]
PIPELINES: tuple[str, ...] = get_args(PipelineName)
P_MD, P_RLD_MD, P_RLD, P_D, P_A = PIPELINES
RELAY_PIPELINES = (P_RLD_MD, P_RLD)  # the ones that decode on RLD first

#: Who streams the first token, per pipeline (executor/roles): P samples t0 but does not
#: stream it — t0 travels with the KV, and the first decoder streams it the moment it has
#: imported that KV, before its first decode step. That decoder is RLD on the relay
#: pipelines and MD (or D) otherwise.
FIRST_TOKEN_STREAMER = {P_MD: MD, P_RLD_MD: RLD, P_RLD: RLD, P_D: D, P_A: AGG}


def streamer_site(pipeline: str, src: str, dst: str) -> tuple[str, str]:
    """(role, datacenter) of the decoder that streams a flow's first token (:data:`FIRST_TOKEN_STREAMER`):
    RLD sits with P in ``src``; every other streamer in ``dst``."""
    role = FIRST_TOKEN_STREAMER[pipeline]
    return role, src if role == RLD else dst


#: The SLA's TTFT quantile: a plan meets it when at most 10 % of requests are late (P90).
SLA_QUANTILE = 0.90


# --- the anomalous-traffic filter ---------------------------------------------------

@dataclass(frozen=True)
class FilterRule:
    """The anomalous-traffic filter: a request with a long input, a low prefix hit and a
    short output (all three) finishes on RLD (pipeline P-RLD) and never crosses the WAN."""

    min_input_tokens: int = 8192  # input at least this long
    max_hit_rate: float = 0.5  # prefix hit rate below this
    max_output_tokens: int = 500  # output shorter than this

    def is_filtered(self, input_tokens: int, hit_rate: float, output_tokens: int) -> bool:
        return (input_tokens >= self.min_input_tokens and hit_rate < self.max_hit_rate
                and output_tokens < self.max_output_tokens)


DEFAULT_FILTER = FilterRule()


# --- a P queue's admitted classes -----------------------------------------------------

#: A P queue's admitted classes: "mix" takes every class in the scenario's proportions,
#: "light" only the light classes (:func:`placer.p_queues.light_classes`).
MIX, LIGHT = "mix", "light"
#: A class is "heavy" on a P pool when its prefill takes more than this share of the
#: TTFT budget; "light" queues admit only the others, so short prefills never wait
#: behind long ones.
HEAVY_PREFILL_SHARE = 0.25
_CHUNK_SEP = "/c"


def queue_label(util: float, mix: str, chunk_tokens: int) -> str:
    """An A queue's name in plans: utilisation tier, admitted classes and chunk, e.g. 'u0.800/mix/c512'."""
    return f"u{util:.3f}/{mix}{_CHUNK_SEP}{chunk_tokens}"


def queue_chunk_tokens(queue: str | None) -> int | None:
    """The chunk of an A queue named by :func:`queue_label` (None: not such a name)."""
    if not queue or _CHUNK_SEP not in queue:
        return None
    tail = queue.rsplit(_CHUNK_SEP, 1)[1]
    return int(tail) if tail.isdigit() else None


def queue_layout(queues: dict[str, float], count: int) -> dict[str, list[tuple[int, float]]]:
    """Which of a P pool's ``count`` instances serve each of its queues, and with what weight.

    ``queues``: queue name → the instances the plan gives it (``queue_instances``, possibly
    fractional). Queues are laid end to end over the instances in name order, a "light" queue
    after the others (scaled down when they ask for more than the pool has), so a queue owns whole
    instances and shares at most the ones at its edges; its requests go to its instances in
    proportion to the share it has of each (a queue of almost no instances: the nearest one serves
    it). The planner gives "set" queues, and "mix" tiers beside a light queue, whole instances
    (``placer.ilp.p_cuts.add_whole_sets``): laid first, they share none with the light queue.
    Returns queue → [(instance index, weight)], weights summing to 1. An instance two queues
    share is ONE first-come-first-served queue on the hardware — the plan's split of it is
    a bookkeeping device, not a queue discipline (the executor's P has one queue; the
    simulator's router lays queues out by this same rule)."""
    total = sum(queues.values())
    scale = count / total if total > count + 1e-6 else 1.0
    out: dict[str, list[tuple[int, float]]] = {}
    pos = 0.0
    for name in sorted(queues, key=_layout_order):
        lo, hi = pos, pos + queues[name] * scale
        pos = hi
        parts = [(i, min(hi, i + 1) - max(lo, i)) for i in range(count)]
        parts = [(i, w) for i, w in parts if w > 1e-9]
        if not parts:
            parts = [(min(int(lo), count - 1), 1.0)]
        weight = sum(w for _, w in parts)
        out[name] = [(i, w / weight) for i, w in parts]
    return out


def _layout_order(name: str) -> tuple[bool, str]:
    """A queue's place in :func:`queue_layout`: by name, a light queue ('u0.800/light', an A pool's
    'u0.8/light/c512') after the others."""
    parts = name.split("/")
    return (len(parts) > 1 and parts[1] == LIGHT, name)


#: A "set" P queue's kind (``placer.ilp.sets.set_queue_name``): its admitted classes joined by ``+``.
SET_QUEUE_PREFIX = "set:"


def set_queue_classes(queue: str | None, known: frozenset[str] | set[str] = frozenset()) -> frozenset[str] | None:
    """The classes a "set" P queue admits, from its name ('set:a+b/u0.800' on whole instances, or
    'u0.800/set:a+b'); None for any other queue (mix, light, A: every class may come). A class name may
    hold '+': pieces are joined until they name a class of ``known`` (each piece a class when it is empty)."""
    if queue and queue.startswith(SET_QUEUE_PREFIX) and "/u" in queue:
        kind = queue[:queue.rindex("/u")]
    elif queue and "/" in queue and queue.split("/", 1)[1].startswith(SET_QUEUE_PREFIX):
        kind = queue.split("/", 1)[1]
    else:
        return None
    out, piece = set(), ""
    for part in kind[len(SET_QUEUE_PREFIX):].split("+"):
        piece = f"{piece}+{part}" if piece else part
        if not known or piece in known:
            out.add(piece)
            piece = ""
    if piece:  # an unknown tail: kept as it reads
        out.update(piece.split("+"))
    return frozenset(out)


# --- the token-ID handoff from RLD to MD ----------------------------------------------

HandoffMode = Literal["adaptive", "one-shot", "catch-up"]
HANDOFF_MODES: tuple[str, ...] = get_args(HandoffMode)
ADAPTIVE, ONE_SHOT, CATCH_UP = HANDOFF_MODES
#: Adaptive handoff: catch-up when more output tokens than this are pending, else one-shot.
DEFAULT_CATCH_UP_THRESHOLD_TOKENS = 64
#: Bytes of one token ID on the wire, framing included (the report: 100 IDs ≈ 1.5 KB).
TOKEN_ID_BYTES = 15


def handoff_mode(policy: str, pending_tokens: int,
                 threshold_tokens: int = DEFAULT_CATCH_UP_THRESHOLD_TOKENS) -> str:
    """The handoff mode for a request with ``pending_tokens`` output tokens MD lacks:
    ``policy`` itself when it is one-shot or catch-up; adaptive picks catch-up above the
    threshold (a big one-shot extend would stall MD's batch), one-shot otherwise."""
    if policy not in HANDOFF_MODES:
        raise ValueError(f"handoff mode must be one of {', '.join(HANDOFF_MODES)}, got {policy!r}")
    if policy == ADAPTIVE:
        return CATCH_UP if pending_tokens > threshold_tokens else ONE_SHOT
    return policy


@dataclass(frozen=True)
class CatchUpRule:
    """The catch-up protocol: RLD sends the token IDs MD lacks in rounds and keeps decoding;
    each acknowledgement from MD (it has extend-decoded the batch) triggers the next batch of
    the tokens produced meanwhile. The first batch is never final (unless RLD has produced
    nothing); a later one is *final* — RLD stops decoding after it and MD takes over once it
    has extended it — when at most ``final_batch_tokens`` are unsent or it is round
    ``max_rounds``. One-shot is the same protocol with its first batch final.

    :class:`HandoffProtocol` is the one implementation: the executor's RLD runs it
    (`executor.handoff.HandoffSession`) and the simulator times it (`placer.sim.handoff`)."""

    final_batch_tokens: int = 8
    max_rounds: int = 4

    def __post_init__(self) -> None:
        if not isinstance(self.final_batch_tokens, int) or self.final_batch_tokens < 0:
            raise ValueError(f"final_batch_tokens must be a non-negative int, got {self.final_batch_tokens!r}")
        if not isinstance(self.max_rounds, int) or self.max_rounds < 1:
            raise ValueError(f"max_rounds must be an int >= 1, got {self.max_rounds!r}")

    def is_final(self, unsent_tokens: int, round_number: int) -> bool:
        """Whether batch number ``round_number`` (1 = the first) carrying ``unsent_tokens`` is the last."""
        return unsent_tokens <= self.final_batch_tokens or round_number >= self.max_rounds


DEFAULT_CATCH_UP = CatchUpRule()


@dataclass(frozen=True)
class HandoffBatch:
    """Output tokens ``first_index..last_index`` (empty when last < first) of round ``round``
    (1 = the first); ``final``: RLD stops decoding after sending it and MD, once it has
    extend-decoded it, owns the stream."""

    first_index: int
    last_index: int
    final: bool
    round: int

    @property
    def num_tokens(self) -> int:
        return max(0, self.last_index - self.first_index + 1)


class HandoffProtocol:
    """RLD's side of one request's token-ID handoff (``mode`` one-shot or catch-up) under a
    :class:`CatchUpRule`: which batch to send when MD holds the KV (:meth:`start`, on
    MainReady) and on each of MD's acknowledgements (:meth:`on_ack`). Indices are output
    indices: MD has 0 (t0 came with its KV), so the first batch starts at 1."""

    def __init__(self, mode: str, rule: CatchUpRule = DEFAULT_CATCH_UP) -> None:
        if mode not in (ONE_SHOT, CATCH_UP):
            raise ValueError(f"a handoff runs {ONE_SHOT} or {CATCH_UP}, got {mode!r}")
        self.mode, self.rule = mode, rule
        self.sent_upto = 0  # the highest output index MD has (t0 from P)
        self.rounds = 0  # batches sent
        self.final_sent = False

    def start(self, produced_upto: int) -> HandoffBatch:
        """The first batch, given the highest output index RLD has produced (-1: none, RLD
        has no KV yet: an empty final batch, MD streams everything); final in one-shot."""
        if self.rounds:
            raise ValueError("the handoff already started")
        return self._batch(produced_upto, self.mode == ONE_SHOT or produced_upto < 0)

    def on_ack(self, produced_upto: int) -> HandoffBatch:
        """MD acknowledged the last batch: the tokens produced meanwhile, final by the rule."""
        if self.final_sent or not self.rounds:
            raise ValueError("the handoff already sent its final batch" if self.final_sent
                             else "an ack before the first batch")
        return self._batch(produced_upto, self.rule.is_final(produced_upto - self.sent_upto, self.rounds + 1))

    def _batch(self, produced_upto: int, final: bool) -> HandoffBatch:
        self.rounds += 1
        batch = HandoffBatch(self.sent_upto + 1, max(produced_upto, self.sent_upto), final, self.rounds)
        self.sent_upto, self.final_sent = batch.last_index, final
        return batch
