"""A request in flight and the codes its handlers branch on.

in:  what :mod:`placer.sim.events.arrival` fills in at arrival
out: :class:`Req` (slots only: a run holds only the requests in flight), the stage, pipeline and
     pull codes
"""

from __future__ import annotations

# request stages
PREFILL, ON_RLD, HANDOFF, ON_MD, DONE = range(5)
# pipeline codes (router.PIPE_CODE)
PMD, PRLDMD, PRLD, PD, PA = 0, 1, 2, 3, 4
# runtime: which consumers' pulls have reached P (Req.pulls)
PULL_MD, PULL_RLD = 1, 2


class Req:
    """One request's state from arrival to finish (its fields are set in ``ArrivalEvents._new_req``)."""

    __slots__ = ("rid", "t_arr", "n_in", "n_out", "hit", "new", "left", "pos", "path", "p", "rld", "md",
                 "xfer", "t_first", "stage", "rld_tokens", "dec", "vjoin", "dec_tokens", "dec_pause", "ctx",
                 "flow", "kv_md", "ids", "md_pause", "drc_hit", "pulls", "staged", "exported",
                 "kv_foot")  # kv_foot: the KV tokens a decoder reserves for it (set where it joins one)
