"""The executor server's request bodies: what a completion, a chat completion or a control-plane call may carry.

In: JSON bodies. Out: validated pydantic models (`CompletionRequest`, `ChatCompletionRequest` with its
`ChatMessage`s, `InstanceBody`); a bad field → 422 naming it. Strict types (`max_tokens: true` is a
422, not 1), text UTF-8 can carry (a lone surrogate is a 422 naming the field, not a 500), names
with a length bound and a character set, bounded ints, well-formed addresses. Temperatures below
`GREEDY_BELOW` are served greedily (`effective_temperature`).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from placer import pdd

MAX_TOKENS_LIMIT = 4096
MAX_BODY_BYTES = 8 * 1024 * 1024  # default request-body limit: far above any context this engine serves
MAX_SEED = 2**64 - 1  # what a torch generator takes
#: Temperatures in (0, GREEDY_BELOW) are served greedily: softmax(logits / t) tends to argmax as t → 0,
#: and below about |logit| / 3.4e38 the fp32 division overflows (1e-45 gave inf/nan probabilities).
#: 1e-5 is vLLM's cut-off; above it no finite fp32 logit under 3.4e33 can overflow.
GREEDY_BELOW = 1e-5
MAX_NAME_CHARS = 128  # instance, datacenter, chip and model names on the control plane
MAX_TP = 1024  # tensor parallelism of one instance: far above any scale-up domain (NVL72)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]*")
#: host:port (a DNS name, IPv4, or [IPv6]) or an in-process transport's scheme://name/incarnation
_HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")
_SCHEME_ADDRESS = re.compile(r"[a-z][a-z0-9+.-]*://[A-Za-z0-9._:/@-]+")
MAX_ADDRESS_CHARS = 256
#: Choices one request may ask for (`n`): each is its own request through the router, so n = 8 holds
#: eight requests' KV at once; beyond it a 422 rather than a silent fan-out.
MAX_CHOICES = 8
MAX_MESSAGES = 1024  # messages in one chat request (the context bounds them long before)
#: Roles a chat message may have: OpenAI's, less `tool`/`function` (no tool calls here); `developer` is
#: OpenAI's newer name for `system` and is rendered as one.
CHAT_ROLES = ("system", "developer", "user", "assistant")
_LOGPROBS_REFUSED = ("logprobs: this engine does not compute log-probabilities (its sampler returns token ids "
                     "only); leave it out or null")


def _encodable(value: str) -> str:
    """Text that UTF-8 can carry: a lone surrogate (JSON's "\\ud800") is refused, not a 500."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"not valid Unicode text: a lone surrogate at character {exc.start}") from None
    return value


def _name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError("a name starts with a letter or digit and holds only letters, digits and ._:@/+-")
    return value


def _address(value: str | None) -> str | None:
    """host:port with a port in 1..65535, or scheme://name (the in-process transports)."""
    if value is None:
        return value
    if _SCHEME_ADDRESS.fullmatch(value):
        return value
    m = _HOST_PORT.fullmatch(value)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        raise ValueError("an address is host:port (port 1..65535) or scheme://name")
    if m["host"].startswith("["):
        ipaddress.IPv6Address(m["host"][1:-1])  # ValueError names it
    return value


Text = Annotated[str, AfterValidator(_encodable)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), AfterValidator(_encodable),
                 AfterValidator(_name)]


class CompletionRequest(BaseModel):
    # strict: `max_tokens: true` or `"stream": "yes"` is a 422, not 1 or True (a float field still takes 1)
    model_config = ConfigDict(strict=True)

    model: Text | None = Field(None, max_length=MAX_NAME_CHARS,
                               description="The served model to ask (GET /v1/models); optional when one "
                                           "model is served.")
    prompt: Text | list[int] = Field(description="Text (the served model's tokenizer; BOS where it adds one) or "
                                                 "token ids (within its vocabulary).")
    max_tokens: int = Field(16, ge=1, le=MAX_TOKENS_LIMIT, description="Output token budget.")
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False,
                               description=f"0 = greedy (so is anything below {GREEDY_BELOW:g}); finite.")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Sampling seed when temperature > 0, in [0, 2^64).")
    stream: bool = Field(False, description="Stream tokens as server-sent events.")
    ignore_eos: bool = Field(False, description="Keep generating past EOS up to max_tokens.")
    n: int = Field(1, ge=1, le=MAX_CHOICES, description=f"Choices to generate, at most {MAX_CHOICES}: each is its "
                                                        "own request through the router; choice i samples with "
                                                        "seed + i (greedy choices are identical).")
    logprobs: int | None = Field(None, description="Refused (422) unless null: the engine computes no "
                                                   "log-probabilities.")

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value: int | None) -> int | None:
        if value is not None:
            raise ValueError(_LOGPROBS_REFUSED)
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str | list[int]) -> str | list[int]:
        if isinstance(value, list):
            if not value:
                raise ValueError("prompt token list must not be empty")
            bad = [t for t in value if t < 0]
            if bad:
                raise ValueError(f"token ids {bad[:5]} are negative")
        return value


class ChatMessage(BaseModel):
    """One message of a chat: a role and its text (content parts, tool calls and names are not served)."""

    model_config = ConfigDict(strict=True)

    role: Literal[CHAT_ROLES] = Field(description=f"One of {', '.join(CHAT_ROLES)}.")  # type: ignore[valid-type]
    content: Text = Field(description="The message's text (a string).")


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True)

    include_usage: bool = Field(False, description="Send a last chunk with `usage` (and no choices) before "
                                                   "[DONE].")


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat completion body, the fields this engine serves; `logprobs` is refused (422)."""

    model_config = ConfigDict(strict=True)

    model: Text | None = Field(None, max_length=MAX_NAME_CHARS,
                               description="The served model to ask (GET /v1/models); optional when one "
                                           "model is served.")
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES,
                                        description="The conversation, rendered with the checkpoint's chat "
                                                    "template (the byte model's: executor.chat).")
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT, description="Output token budget (16 when "
                                                                                "neither this nor "
                                                                                "max_completion_tokens is given).")
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT,
                                              description="OpenAI's newer name for max_tokens (give one).")
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False,
                               description=f"0 = greedy (so is anything below {GREEDY_BELOW:g}); finite.")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Sampling seed when temperature > 0, in [0, 2^64).")
    stream: bool = Field(False, description="Stream `chat.completion.chunk`s as server-sent events.")
    stream_options: StreamOptions | None = None
    ignore_eos: bool = Field(False, description="Keep generating past EOS up to the budget.")
    n: int = Field(1, ge=1, le=MAX_CHOICES, description=f"Choices to generate, at most {MAX_CHOICES} (each its "
                                                        "own request; choice i samples with seed + i).")
    logprobs: bool | None = Field(None, description="Refused (422) when true: the engine computes no "
                                                    "log-probabilities.")
    top_logprobs: int | None = Field(None, description="Refused (422) unless null, as logprobs.")

    @field_validator("logprobs", "top_logprobs")
    @classmethod
    def _no_logprobs(cls, value: Any) -> Any:
        if value not in (None, False):
            raise ValueError(_LOGPROBS_REFUSED)
        return value

    @model_validator(mode="after")
    def _one_budget(self) -> ChatCompletionRequest:
        if self.max_tokens is not None and self.max_completion_tokens is not None \
                and self.max_tokens != self.max_completion_tokens:
            raise ValueError(f"max_completion_tokens: {self.max_completion_tokens} disagrees with max_tokens "
                             f"{self.max_tokens}; give one")
        return self

    @property
    def budget(self) -> int:
        """The output token budget."""
        return self.max_completion_tokens or self.max_tokens or 16


class InstanceBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    name: Name
    role: Text = Field(max_length=16, description=f"{', '.join(pdd.ROLES[:-1])} or {pdd.ROLES[-1]}.")
    datacenter: Name = Field(description="One the deployment knows (its plan's, its instances', its lines').")
    chip: Name = "cpu"
    tp: int = Field(1, ge=1, le=MAX_TP)
    address: Annotated[str | None, AfterValidator(_address)] = Field(None, max_length=MAX_ADDRESS_CHARS)
    model: Name | None = Field(None, description="The served model it belongs to (required by a fleet).")


def effective_temperature(temperature: float) -> float:
    """The temperature the engine samples with: 0 (greedy) below `GREEDY_BELOW`."""
    return temperature if temperature >= GREEDY_BELOW else 0.0
