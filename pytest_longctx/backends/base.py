"""The backend protocol: one request type, one completion type, one async method.

Every model provider implements :class:`Backend`. Requests are plain data so they can be hashed
for the cache, printed in a plan, and sent through any client; nothing here imports an SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pytest_longctx.util.canonical import canonical_sha256

#: Bump when the meaning of a cache key changes, so old entries are never reused wrongly.
CACHE_KEY_VERSION = 1


@dataclass(frozen=True)
class Message:
    """One chat turn."""

    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Request:
    """Everything that determines a model's answer (and so the cache key)."""

    messages: tuple[Message, ...]
    system: str | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    #: Text the assistant turn starts with (sent as a final assistant message).
    prefill: str | None = None
    #: ``template-id@version`` of the prompt that built the messages.
    template: str = ""
    #: Options scored by likelihood instead of generation (local models only), e.g. "ABCD".
    choices: tuple[str, ...] = ()
    #: Characters at the start of the first user turn that sibling requests share (0: none). Anthropic prompt
    #: caching marks their end with a cache breakpoint; the text the model reads is the same either way, so it
    #: is not part of the cache key (:func:`request_key`).
    cache_prefix: int = 0

    @staticmethod
    def user(text: str, **kwargs: Any) -> Request:
        """A single-turn request."""
        return Request(messages=(Message("user", text),), **kwargs)

    def text(self) -> str:
        """Every prompt text the model reads (system, messages, prefill): what an input-token estimate counts."""
        return (self.system or "") + "".join(m.content for m in self.messages) + (self.prefill or "")

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (stable field order irrelevant: keys are sorted when hashed)."""
        return {
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "system": self.system,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stop": list(self.stop),
            "prefill": self.prefill,
            "template": self.template,
            "choices": list(self.choices),
            **({"cache_prefix": self.cache_prefix} if self.cache_prefix else {}),
        }

    @staticmethod
    def from_json(obj: dict[str, Any]) -> Request:
        return Request(
            messages=tuple(Message(m["role"], m["content"]) for m in obj["messages"]),
            system=obj.get("system"),
            max_tokens=int(obj.get("max_tokens", 512)),
            temperature=float(obj.get("temperature", 0.0)),
            stop=tuple(obj.get("stop", ())),
            prefill=obj.get("prefill"),
            template=obj.get("template", ""),
            choices=tuple(obj.get("choices", ())),
            cache_prefix=int(obj.get("cache_prefix", 0)),
        )

    def prompt_chars(self) -> int:
        return sum(len(m.content) for m in self.messages) + len(self.system or "")

    def split_prefix(self) -> tuple[str, str] | None:
        """The first user turn as (shared prefix, rest) when ``cache_prefix`` marks one, else None."""
        if not self.cache_prefix or not self.messages or self.messages[0].role != "user":
            return None
        text = self.messages[0].content
        if not 0 < self.cache_prefix < len(text):
            return None
        return text[: self.cache_prefix], text[self.cache_prefix:]


def shared_prefix_end(text: str, shared: str) -> int:
    """``cache_prefix`` for a prompt whose shared part ends with ``shared`` (its first occurrence; 0: absent)."""
    if not shared:
        return 0
    at = text.find(shared[:64])  # a short probe, then one comparison: ~50x faster than finding a long ``shared``
    if at >= 0 and not text.startswith(shared, at):
        at = text.find(shared, at + 1)
    return at + len(shared) if at >= 0 else 0


def request_key(provider: str, model: str, request: Request) -> str:
    """sha256 of the canonical JSON of provider, model and the full request. Never a secret."""
    body = request.to_json()
    body.pop("cache_prefix", None)  # where a cache breakpoint goes changes the bill, not the answer
    payload = {"v": CACHE_KEY_VERSION, "provider": provider, "model": model, "request": body}
    return canonical_sha256(payload)


@dataclass
class Completion:
    """A model's answer and what it cost."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    stop_reason: str | None = None
    #: For ``Request.choices``: log-probability of each choice (local models).
    choice_logprobs: dict[str, float] = field(default_factory=dict)
    #: Of ``input_tokens`` (every input token the model read): written to / read from the provider's prompt cache.
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_s": self.latency_s,
            "stop_reason": self.stop_reason,
            "choice_logprobs": dict(self.choice_logprobs),
        }
        if self.cache_creation_input_tokens or self.cache_read_input_tokens:
            out["cache_creation_input_tokens"] = self.cache_creation_input_tokens
            out["cache_read_input_tokens"] = self.cache_read_input_tokens
        return out

    @staticmethod
    def from_json(obj: dict[str, Any], *, cache_hit: bool = False) -> Completion:
        return Completion(
            text=str(obj["text"]),
            input_tokens=int(obj.get("input_tokens", 0)),
            output_tokens=int(obj.get("output_tokens", 0)),
            latency_s=float(obj.get("latency_s", 0.0)),
            cache_hit=cache_hit,
            stop_reason=obj.get("stop_reason"),
            choice_logprobs={str(k): float(v) for k, v in obj.get("choice_logprobs", {}).items()},
            cache_creation_input_tokens=int(obj.get("cache_creation_input_tokens", 0)),
            cache_read_input_tokens=int(obj.get("cache_read_input_tokens", 0)),
        )


@dataclass(frozen=True)
class Oracle:
    """What a scripted model (a provider that answers ``in_process``, e.g. ``fake/*``) may answer: the ideal
    output and wrong alternatives. Passed beside a request, never part of it or of its cache key."""

    answer: str
    wrong: tuple[str, ...] = ()


@runtime_checkable
class Backend(Protocol):
    """A model behind one async call. ``provider``/``model`` name it in records and cache keys."""

    provider: str
    model: str
    #: Usable context window in tokens (prompt + answer), used to size default conditions.
    context_window: int

    async def complete(self, request: Request) -> Completion: ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (or the approximation named by ``tokenizer``)."""
        ...

    @property
    def tokenizer(self) -> str: ...

    async def aclose(self) -> None: ...
