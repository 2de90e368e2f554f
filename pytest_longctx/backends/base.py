"""The backend protocol: one request type, one completion type, one async method.

Every model provider implements :class:`Backend`. Requests are plain data so they can be hashed
for the cache, printed in a plan, and sent through any client; nothing here imports an SDK.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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

    @staticmethod
    def user(text: str, **kwargs: Any) -> Request:
        """A single-turn request."""
        return Request(messages=(Message("user", text),), **kwargs)

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
        )

    def prompt_chars(self) -> int:
        return sum(len(m.content) for m in self.messages) + len(self.system or "")


def request_key(provider: str, model: str, request: Request) -> str:
    """sha256 of the canonical JSON of provider, model and the full request. Never a secret."""
    payload = {"v": CACHE_KEY_VERSION, "provider": provider, "model": model, "request": request.to_json()}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_s": self.latency_s,
            "stop_reason": self.stop_reason,
            "choice_logprobs": dict(self.choice_logprobs),
        }

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
        )


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
