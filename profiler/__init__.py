"""Chip and WAN-link profiler: measures what a chip really gives and calibrates the planner.

Entry points (imported lazily, so ``python3 -m profiler.run`` needs only torch, triton and
the standard library): :func:`profile_chip`, :func:`probe_link`, :func:`serve_link`,
:class:`ChipProfile`, :class:`LinkProfile`, :func:`measured_from` (placer.profiles), :func:`store_profile`,
:class:`RooflineExceededError`.
"""

from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "profile_chip": ("profiler.run", "profile_chip"),
    "probe_link": ("profiler.link", "probe"),
    "serve_link": ("profiler.link", "serve"),
    "ChipProfile": ("placer.profiles.records", "ChipProfile"),
    "LinkProfile": ("placer.profiles.records", "LinkProfile"),
    "measured_from": ("placer.profiles.records", "measured_from"),
    "store_profile": ("profiler.calibrate", "store"),
    "RooflineExceededError": ("placer.profiles", "RooflineExceededError"),
}

__all__ = [
    "ChipProfile", "LinkProfile", "RooflineExceededError", "measured_from", "probe_link", "profile_chip",
    "serve_link", "store_profile",
]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'profiler' has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    return getattr(import_module(module), attr)
