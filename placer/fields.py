"""Field types shared by every input model (scenario, plan): strict, finite, bounded.

in:  nothing (type definitions)
out: :func:`real` / :func:`count` (pydantic ``Annotated`` types) and :data:`Name`

One validation layer for numbers: every numeric field of a scenario or plan is declared
with these, so each is

* strict — a YAML boolean (``on``, ``yes``, ``true``) or a quoted string is not a number;
  an integer field takes no fraction (a float field takes an integer). One exception: a float
  field takes a string in exponent form (``1e-3``, ``2E+5``, ``1.5e3``), which YAML 1.2 reads as
  a number but PyYAML (YAML 1.1: a dot and a signed exponent, ``1.0e-3``) leaves a string;
* finite — ``.inf``, ``-.inf`` and ``.nan`` are rejected;
* bounded — each field names bounds that make physical sense (docs/scenario.md lists
  them), so nothing downstream overflows (e.g. ``arrival_rps: 1e308``).

Pydantic's messages name the field path and the value ("less than or equal to 1000000").
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, AllowInfNan, BeforeValidator, Field, Strict

from placer.errors import InputError

#: A YAML 1.2 float in exponent form (what YAML 1.1 leaves a string when it lacks the dot or the sign).
_EXPONENT_FLOAT = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+")


def _yaml12_float(value: Any) -> Any:
    """``value``, or the float a YAML 1.2 reader would have made of an exponent-form string."""
    if isinstance(value, str) and _EXPONENT_FLOAT.fullmatch(value):
        return float(value)
    return value


def real(*, gt: float | None = None, ge: float | None = None, lt: float | None = None,
         le: float | None = None) -> Any:
    """A strict, finite float within the given bounds (give an upper bound: every quantity has one)."""
    return Annotated[float, BeforeValidator(_yaml12_float), Strict(), AllowInfNan(False),
                     Field(gt=gt, ge=ge, lt=lt, le=le)]


def count(*, ge: int = 0, le: int) -> Any:
    """A strict integer in [ge, le]."""
    return Annotated[int, Strict(), Field(ge=ge, le=le)]


def _name(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError(f"must not contain control characters, got {value!r}")
    return value


#: A user-chosen name (scenario, datacenter, chip, class): 1..200 characters, not blank, no control characters.
Name = Annotated[str, Strict(), Field(min_length=1, max_length=200), AfterValidator(_name)]

# Bounds that make physical sense, shared where several fields measure the same thing.
MAX_TOKENS = 10_000_000  # tokens in one prompt or answer
MAX_CHIPS = 1_000_000  # chips of one kind in one datacenter
MAX_RPS = 1_000_000.0  # requests per second offered to one deployment
MAX_SECONDS = 3_600.0  # an SLA of more than an hour is not a latency SLA
MAX_TIMESTAMP_S = 1e11  # a trace time or Unix time in seconds (year ~5100): any real clock, finite float maths


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str, *, zero_ok: bool = False) -> float:
    """'90', '90s', '15m', '1h', '2d' → seconds, > 0 (≥ 0 with ``zero_ok``, e.g. a cool-down), InputError
    naming the option and the text: the one reading of a duration the CLI's options take (jobs' windows
    and cool-downs, simulate's replanning cadence)."""
    match = _DURATION.match(text)
    if not match or (float(match.group(1)) <= 0 and not zero_ok):
        bound = "≥ 0" if zero_ok else "> 0"
        raise InputError(f"{option}: not a duration {bound}: {text!r}; use e.g. 90s, 15m, 1h or 2d")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
