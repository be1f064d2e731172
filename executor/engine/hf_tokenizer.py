"""A checkpoint's own tokenizer: `tokenizer.json` through the `tokenizers` library, chat template by jinja2.

In: a model directory (`tokenizer.json`; optionally `tokenizer_config.json`,
`generation_config.json`, `config.json`, `chat_template.jinja`). Out: `HFTokenizer` —
text ↔ token ids with the same surface as `ByteTokenizer` (`encode(text, add_bos)`,
`decode(ids)`, `bos_id`, `eos_id`, `vocab_size`), every EOS id (`eos_ids`), and
`render_chat` / `encode_chat` for a list of `{"role", "content"}` messages.

Rules (as transformers applies them): `encode(text, add_bos=True)` runs the tokenizer's
post-processor (which adds BOS where the checkpoint's does); the EOS ids are
`generation_config.json`'s `eos_token_id` (an int or a list), else `config.json`'s,
else `tokenizer_config.json`'s `eos_token`; the chat template is
`tokenizer_config.json`'s `chat_template` (a string, or the entry named "default" of a
list) or `chat_template.jinja`, rendered in a sandbox with `trim_blocks`/`lstrip_blocks`
and `messages`, `add_generation_prompt`, `bos_token`, `eos_token`; the rendered text is
encoded without special tokens (the template writes them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from placer.errors import InputError
from placer.readers import MAX_FILE_BYTES, load_mapping, number, read_text

TOKENIZER_FILE = "tokenizer.json"
#: Largest token id a config may name (ids are int32 in every tokenizer we read).
MAX_TOKEN_ID = 2**31 - 1


class TokenizerError(ValueError):
    """A tokenizer file that cannot be used; the message names the file and the field."""


def _json_or_empty(path: Path) -> dict[str, Any]:
    """An optional JSON file (an object) through the gate of `placer.readers`; {} when absent."""
    if not path.exists():
        return {}
    try:
        return load_mapping(path, "tokenizer file", kind="json")
    except InputError as exc:
        raise TokenizerError(str(exc)) from None


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config writes it: a string or `{"content": ...}`."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _ids(value: Any, where: str) -> tuple[int, ...]:
    """Token ids as configs write them: an int, a list of ints, or null."""
    if value is None:
        return ()
    try:
        return tuple(number(v, where, lo=0, hi=MAX_TOKEN_ID, integer=True)
                     for v in (value if isinstance(value, list) else [value]))
    except InputError as exc:
        raise TokenizerError(str(exc)) from None


@dataclass(frozen=True)
class HFTokenizer:
    """Text ↔ ids of one checkpoint, its EOS ids and chat template."""

    tokenizer: Tokenizer
    eos_ids: tuple[int, ...]
    bos_id: int | None = None
    chat_template: str | None = None
    bos_token: str = ""
    eos_token: str = ""

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> HFTokenizer:
        root = Path(model_dir)
        path = root / TOKENIZER_FILE
        if not path.is_file():
            raise TokenizerError(f"{path}: not found (the model directory needs a tokenizer.json)")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise TokenizerError(f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB")
        try:  # the tokenizers library parses it (Rust: bounded recursion, every failure an exception)
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - the library raises a bare Exception
            raise TokenizerError(f"{path}: cannot be read by tokenizers ({exc})") from None
        tcfg = _json_or_empty(root / "tokenizer_config.json")
        gen, cfg = _json_or_empty(root / "generation_config.json"), _json_or_empty(root / "config.json")
        bos_token, eos_token = _token_text(tcfg.get("bos_token")) or "", _token_text(tcfg.get("eos_token")) or ""
        eos_ids = (_ids(gen.get("eos_token_id"), f"{root / 'generation_config.json'}: eos_token_id")
                   or _ids(cfg.get("eos_token_id"), f"{root / 'config.json'}: eos_token_id"))
        if not eos_ids and eos_token and tok.token_to_id(eos_token) is not None:
            eos_ids = (tok.token_to_id(eos_token),)
        bos_ids = (_ids(gen.get("bos_token_id"), f"{root / 'generation_config.json'}: bos_token_id")
                   or _ids(cfg.get("bos_token_id"), f"{root / 'config.json'}: bos_token_id"))
        bos_id = bos_ids[0] if bos_ids else (tok.token_to_id(bos_token) if bos_token else None)
        return cls(tok, eos_ids, bos_id, _chat_template(root, tcfg), bos_token, eos_token)

    @property
    def eos_id(self) -> int | None:
        """The first EOS id (the one `Request.eos_token_id` carries); `eos_ids` has them all."""
        return self.eos_ids[0] if self.eos_ids else None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of `text`; `add_bos` runs the post-processor (BOS where the checkpoint adds one)."""
        return self.tokenizer.encode(text, add_special_tokens=add_bos).ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`, special tokens skipped."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def render_chat(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        """The chat template rendered over `messages` (TokenizerError if the checkpoint has none)."""
        if self.chat_template is None:
            raise TokenizerError("this checkpoint has no chat template (tokenizer_config.json chat_template)")
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
        try:
            return env.from_string(self.chat_template).render(
                messages=list(messages), add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token, eos_token=self.eos_token)
        except TemplateError as exc:
            raise TokenizerError(f"chat template: {exc}") from None

    def encode_chat(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of the rendered chat (the template writes the special tokens)."""
        return self.encode(self.render_chat(messages, add_generation_prompt), add_bos=False)


def _chat_template(root: Path, tcfg: dict[str, Any]) -> str | None:
    template = tcfg.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template
                 if isinstance(t, dict) and isinstance(t.get("name"), str)}
        template = named.get("default")
    if template is None and (root / "chat_template.jinja").exists():
        try:
            template = read_text(root / "chat_template.jinja", "chat template")
        except InputError as exc:
            raise TokenizerError(str(exc)) from None
    return template if isinstance(template, str) else None
