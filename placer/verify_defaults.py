"""How many requests the plan's default verification simulates: the defaults ``placer optimize`` prints in its
help and :mod:`placer.sim.verify` runs, here so that the command line reads them without importing the
simulator (issue 47: ``placer optimize --no-verify`` imports only what it runs).

in:  nothing; out: :data:`CHECK_REQUESTS`, :data:`PERTURB_REQUESTS`.
"""

#: Requests of ``placer optimize``'s default check: the simulator replays ~35k requests/s, so this
#: adds about 0.1–0.4 s on the examples while its P90 stays within a few % of a 40k-request run.
CHECK_REQUESTS = 10_000
#: Requests of each perturbed run of that check (``placer optimize``'s robustness line: both extremes).
PERTURB_REQUESTS = 4_000
