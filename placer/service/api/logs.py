"""Secrets never reach a log line: a filter on uvicorn's access log that redacts credentials
carried in a URL's query string.

The service takes its token from the ``Authorization`` header or a POST form only, but a
client can still put ``?token=…`` in a URL (an old bookmark, a script); uvicorn logs the
full path with its query at INFO. :func:`install` adds :class:`RedactQuery` to the
``uvicorn.access`` logger (idempotent), which rewrites the value of every query parameter
named like a credential (``token``, ``access_token``, ``api_key``, ``password``, … — also
inside a URL-encoded ``next=``, and also when the name itself is URL-encoded: ``tok%65n``) to
``[redacted]`` before any handler formats the record.
"""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
SECRET_PARAMS = ("token", "access_token", "api_key", "apikey", "password", "secret")
REDACTED = "[redacted]"


def _spelled(name: str) -> str:
    """A pattern for ``name`` with any of its characters literal or URL-encoded once or twice
    (``tok%65n`` decodes to ``token``: the server reads it as the token)."""
    return "".join(f"(?:{re.escape(ch)}|%{ord(ch):02X}|%25{ord(ch):02X})" for ch in name)


# a parameter name (any character possibly URL-encoded), then "=" literally or URL-encoded once or
# twice, then its value up to the next separator
_PATTERN = re.compile(r"(?i)((?:^|[?&;]|%26|%3F|%2526|%253F)(?:" + "|".join(_spelled(n) for n in SECRET_PARAMS)
                      + r")(?:=|%3D|%253D))[^&;#\s%]*(?:%(?!26|3B)[0-9A-F]{2}[^&;#\s%]*)*")


def redact(text: str) -> str:
    """``text`` with the value of every credential-like query parameter replaced."""
    return _PATTERN.sub(lambda m: m.group(1) + REDACTED, text)


class RedactQuery(logging.Filter):
    """Redacts credentials in a record's message arguments (uvicorn passes the path as one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install(logger_name: str = ACCESS_LOGGER) -> None:
    """Add the filter to ``logger_name`` once (uvicorn re-creates handlers, not logger filters)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, RedactQuery) for f in logger.filters):
        logger.addFilter(RedactQuery())
