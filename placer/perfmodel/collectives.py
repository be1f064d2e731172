"""Communication of an instance: the tensor-parallel all-reduce, the expert-parallel all-to-all,
the pipeline's hop and bubble, and the RDMA of KV to a peer (formulas: :mod:`placer.perfmodel`).

in:  an instance's resources (:class:`~placer.perfmodel.resources.InstanceResources`), tokens or bytes
out: seconds
"""

from __future__ import annotations

import math
from functools import cached_property

from placer.perfmodel.constants import (
    ACT_BYTES, COLLECTIVE_LATENCY_S, CROSS_NODE_COLLECTIVE_LATENCY_S, EXPERT_LOAD_BALANCE, FP8_SCALE_GROUP,
    KERNEL_LAUNCH_S, MOE_ROUTED_EXPERTS, NCCL_NET_HOP_S, NCCL_NVLINK_HOP_S, NCCL_RING_BASE_S, RDMA_LATENCY_S,
    SCALEUP_DOMAIN_CHIPS,
)
from placer.perfmodel.resources import InstanceResources


class InstanceCollectives(InstanceResources):
    """An instance's communication seconds (the second layer of :class:`~placer.perfmodel.InstanceModel`)."""

    @cached_property
    def _nodes(self) -> int:
        return math.ceil(self.stage_tp / SCALEUP_DOMAIN_CHIPS)

    def allreduce_s(self, n_bytes: float) -> float:
        """One ring all-reduce of ``n_bytes`` over a tensor-parallel group (the instance, or one
        pipeline stage): α(tp) + 2(tp−1)/tp · bytes / S."""
        tp, nodes = self.stage_tp, self._nodes
        inter_steps = 2 * (nodes - 1)
        alpha = KERNEL_LAUNCH_S + NCCL_RING_BASE_S + (2 * (tp - 1) - inter_steps) * NCCL_NVLINK_HOP_S \
            + inter_steps * NCCL_NET_HOP_S
        bw = self.chip.scaleup_bytes_per_s if nodes == 1 else min(self.chip.scaleup_bytes_per_s,
                                                                  self.chip.nic_bytes_per_s)
        return alpha + 2 * (tp - 1) / tp * n_bytes / bw

    def comm_s(self, tokens: float, prefill: bool = False) -> float:
        """Parallel-communication seconds for one forward over ``tokens`` tokens (see :mod:`placer.perfmodel`)."""
        if self.stage_tp == 1:
            return 0.0
        m = self.model
        if not self.is_moe:  # over all layers: with pp stages, each stage's group does layers/pp of them
            return 2 * m.layers * self.allreduce_s(tokens * m.hidden * ACT_BYTES)
        k = m.experts_per_token or MOE_ROUTED_EXPERTS
        per_token = m.hidden * (1 + 4 / FP8_SCALE_GROUP) + m.hidden * ACT_BYTES  # fp8 dispatch + bf16 combine
        nodes = self._nodes
        if prefill and nodes > 1:
            limit = m.max_nodes_per_token or nodes
            sends = min(k, limit, nodes) * (nodes - 1) / nodes
        else:
            sends = min(k, self.tp) * (self.tp - 1) / self.tp
        bw = self.chip.scaleup_bytes_per_s if nodes == 1 else min(self.chip.scaleup_bytes_per_s,
                                                                  self.chip.nic_bytes_per_s)
        alpha = COLLECTIVE_LATENCY_S if nodes == 1 else CROSS_NODE_COLLECTIVE_LATENCY_S
        layers = m.moe_layers or m.layers
        # the all-to-all ends when the busiest rank has received its tokens: load ∝ its experts' load
        return layers * (2 * alpha + tokens / self.tp * sends * per_token / (bw * EXPERT_LOAD_BALANCE))

    def pipeline_fill_s(self, stage_s: float, tokens: float) -> float:
        """The pipeline bubble of one prompt or step: its last chunk (or micro-batch) still crosses the
        other pp − 1 stages after the first stage is done, each a stage time plus the activations' hop."""
        if self.pp == 1:
            return 0.0
        return (self.pp - 1) * (stage_s + self.stage_hop_s(tokens))

    def stage_hop_s(self, tokens: float) -> float:
        """Seconds to pass ``tokens`` tokens' activations (hidden × bf16) from one stage to the next, over
        the stage's NICs (the stages sit on different nodes)."""
        n_bytes = tokens * self.model.hidden * ACT_BYTES
        return CROSS_NODE_COLLECTIVE_LATENCY_S + n_bytes / (self.stage_tp * self.chip.nic_bytes_per_s)

    def rdma_s(self, n_bytes: float, peer: InstanceResources | None = None) -> float:
        """Seconds to move ``n_bytes`` of KV to a peer in the same datacenter."""
        bw = self.rdma_bytes_per_s if peer is None else min(self.rdma_bytes_per_s, peer.rdma_bytes_per_s)
        return n_bytes / bw + RDMA_LATENCY_S
