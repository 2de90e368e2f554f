"""``anthropic/<model-id>``: Claude through the official SDK's AsyncAnthropic Messages API.

The key comes from ``ANTHROPIC_API_KEY`` and the base URL from the SDK's standard
``ANTHROPIC_BASE_URL`` (how tests point it at the local Messages-API server). The SDK's own
retries are off: requests go through the retry loop every backend shares
(:mod:`pytest_longctx.backends.retry`), which retries 408/409/429/5xx (529 included), timeouts,
dropped connections and malformed bodies, honouring ``retry-after``, slows the whole worker down
on 429s, and stops the run on errors no retry can fix (auth, spend limit, credit) and on an
endpoint that cannot be reached.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.retry import RETRY_STATUSES, Retrier, RetryPolicy, Verdict, retry_after_seconds
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import NotCachedError
from pytest_longctx.util.fsutil import atomic_write_text

DEFAULT_BASE_URL = "https://api.anthropic.com"
FATAL_CODES = ("spend_limit", "billing", "organization_on_hold", "payment")


def missing_key_message() -> str | None:
    """One line when ``ANTHROPIC_API_KEY`` is not set; None when it is."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        return None
    return ("ANTHROPIC_API_KEY is not set: export your key to run anthropic/* models "
            "(or use --longctx-model local/smollm2-135m, which needs none)")


def model_note(name: str) -> str | None:
    """One line when the SDK lists ``name`` as deprecated (it would warn on every request): said once per run."""
    try:
        from anthropic import __version__
        from anthropic._data import DEPRECATED_MODELS  # the list the SDK's own per-request warning reads
    except ImportError:
        return None
    end = DEPRECATED_MODELS.get(name)
    if end is None:
        return None
    return (f"deprecated: the anthropic SDK {__version__} says {name} reaches end-of-life on {end}; "
            "docs/claude.md names the current models")


def repeated_warnings(name: str) -> list[str]:
    """The SDK's per-request deprecation warning for ``name`` (said once by :func:`model_note` instead)."""
    return [re.escape(f"The model '{name}' is deprecated")]


def build_params(model: str, request: Request, *, temperature: bool = True, cache: bool = True,
                 cache_ttl: str | None = None) -> dict[str, Any]:
    """The SDK keyword arguments for ``request`` (pure: tested without network).

    A request that marks a shared prefix (``Request.cache_prefix``) sends its first user turn as two text
    blocks, the first ending in a prompt-cache breakpoint (``cache=False``: one string, as without a mark;
    ``cache_ttl``: the breakpoint's lifetime, e.g. ``"1h"``; None: the API's default, 5 minutes).

    The SDK (>= 1.0) no longer takes ``temperature``; the API still accepts it for models that
    support sampling parameters, so it travels in ``extra_body``. Models released after
    claude-opus-4.6 reject it; the backend then drops it (``temperature=False``).
    """
    messages: list[dict[str, Any]] = [{"role": m.role, "content": m.content} for m in request.messages]
    split = request.split_prefix() if cache else None
    if split is not None:  # the same text in two blocks; the breakpoint ends the prefix sibling requests share
        control = {"type": "ephemeral", **({"ttl": cache_ttl} if cache_ttl else {})}
        messages[0]["content"] = [{"type": "text", "text": split[0], "cache_control": control},
                                  {"type": "text", "text": split[1]}]
    if request.prefill:
        messages.append({"role": "assistant", "content": request.prefill})
    params: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "messages": messages}
    if temperature:
        params["extra_body"] = {"temperature": request.temperature}
    if request.system:
        params["system"] = request.system
    if request.stop:
        params["stop_sequences"] = list(request.stop)
    return params


def completion_of(message: Any, latency_s: float = 0.0) -> Completion:
    """A Message's answer and usage. ``input_tokens`` counts every input token the model read: the API's
    ``input_tokens`` (after the last cache breakpoint) plus the prompt-cache writes and reads it reports."""
    usage = message.usage
    written = int(getattr(usage, "cache_creation_input_tokens", None) or 0)
    read = int(getattr(usage, "cache_read_input_tokens", None) or 0)
    text = "".join(getattr(block, "text", "") for block in message.content)
    return Completion(text=text, input_tokens=int(usage.input_tokens) + written + read,
                      output_tokens=usage.output_tokens, latency_s=latency_s, stop_reason=message.stop_reason,
                      cache_creation_input_tokens=written, cache_read_input_tokens=read)


def verdict(exc: Exception) -> Verdict:
    """:func:`classify` as the shared retry loop's verdict (connection failures mark the endpoint unreachable)."""
    import anthropic

    kind, retry_after = classify(exc)
    unreachable = isinstance(exc, anthropic.APIConnectionError) and not isinstance(exc, anthropic.APITimeoutError)
    return Verdict(kind, describe(exc), retry_after=retry_after, unreachable=unreachable,
                   rate_limited=kind == "retry" and getattr(exc, "status_code", None) == 429, billing=billing(exc))


def billing(exc: BaseException) -> str:
    """What the API may bill for a failed attempt (:attr:`Verdict.billing`): nothing for an error answer, nothing
    when the connection was never made, else (a timeout, a dropped connection, a body cut short) unknown."""
    import anthropic
    import httpx

    if isinstance(exc, anthropic.APIStatusError):
        return "none"
    if isinstance(exc, anthropic.APIConnectionError) and isinstance(exc.__cause__, (httpx.ConnectError,
                                                                                    httpx.ConnectTimeout)):
        return "unsent"
    return "unknown"


def classify(exc: BaseException) -> tuple[str, float | None]:
    """("retry" | "fatal" | "fail", retry-after seconds) for an SDK exception."""
    import anthropic

    if isinstance(exc, (anthropic.APITimeoutError, anthropic.APIConnectionError)):
        return "retry", None
    if isinstance(exc, anthropic.APIResponseValidationError):
        return "retry", None
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        code = (getattr(exc, "error_code", None) or "").lower()
        message = str(exc).lower()
        if status in (401, 402, 403) or any(c in code for c in FATAL_CODES) or "credit balance" in message:
            return "fatal", None
        if status in RETRY_STATUSES:
            return "retry", retry_after_seconds(exc.response.headers if exc.response is not None else None)
        return "fail", None
    if isinstance(exc, ValueError):  # a body the SDK could not decode
        return "retry", None
    return "fail", None


class AnthropicBackend:
    """Claude models behind the backend protocol."""

    provider = "anthropic"

    def __init__(self, name: str, context_window: int = 200_000, *, max_concurrency: int = 16,
                 policy: RetryPolicy | None = None, timeout_s: float = 600.0, seed: int = 0,
                 exact_tokens: bool = False, cache_dir: Path | None = None, replay: bool = False) -> None:
        self.model = name
        self.context_window = context_window
        self._counter: TiktokenCounter | None = None  # loaded on first use: the prefetch dispatcher never counts
        url = os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self.retrier = Retrier("anthropic", url, policy or RetryPolicy(), seed=seed, max_concurrency=max_concurrency,
                               hint="; set ANTHROPIC_BASE_URL to a running server, or unset it for the real API")
        self._timeout = timeout_s
        self._client: Any = None
        #: False once the API said this model takes no temperature (newer Claude models).
        self.sends_temperature = True
        self._exact = ExactCounter(name, cache_dir, self.retrier, replay=replay) if exact_tokens else None

    @property
    def tokenizer(self) -> str:
        if self._exact is not None:
            return self._exact.name
        return TiktokenCounter.name + " (approximation of Claude's tokenizer)"

    def count_tokens(self, text: str) -> int:
        if self._exact is not None:
            return self._exact.count(text)
        if self._counter is None:
            self._counter = TiktokenCounter()
        return self._counter.count(text)

    def count_request(self, request: Request) -> int | None:
        """The exact billed input tokens of ``request`` with --longctx-exact-tokens, else None."""
        return self._exact.count_request(request) if self._exact is not None else None

    def _sdk(self) -> Any:
        if self._client is None:
            import anthropic

            self._client = anthropic.AsyncAnthropic(max_retries=0, timeout=self._timeout)
        return self._client

    async def complete(self, request: Request) -> Completion:
        start = time.perf_counter()

        async def attempt() -> Any:
            nonlocal start
            start = time.perf_counter()
            return await self._send(request)

        def judge(exc: Exception) -> Verdict:
            if self.sends_temperature and "temperature" in str(exc) and "deprecated" in str(exc):
                self.sends_temperature = False  # this model takes no sampling parameters: ask again without
                return Verdict("retry", describe(exc), retry_after=0.0)  # an attempt the API saw, like any other
            return verdict(exc)

        message = await self.retrier.run(attempt, judge)
        return completion_of(message, latency_s=time.perf_counter() - start)

    async def _send(self, request: Request) -> Any:
        params = build_params(self.model, request, temperature=self.sends_temperature)
        raw = await self._sdk().messages.with_raw_response.create(**params)
        return await raw.parse()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


class ExactCounter:
    """Claude's own token counts from the count_tokens endpoint, cached on disk per model and text.

    The endpoint counts a whole user message; the fixed overhead of an empty message is measured
    once and subtracted, so counts of pieces add up to (at most) the count of their concatenation.
    """

    def __init__(self, model: str, cache_dir: Path | None, retrier: Retrier | None = None, *,
                 replay: bool = False) -> None:
        self.model = model
        #: ``--longctx-cache replay``: a count not cached is an error of the trial, never a request.
        self.replay = replay
        self._retrier = retrier or Retrier("anthropic", os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL)
        self.name = f"anthropic/{model} (count_tokens API)"
        self._folder = (cache_dir or Path(".longctx-cache")) / "token-counts" / model.replace("/", "_")
        self._client: Any = None
        self._overhead: int | None = None

    def _counted(self, params: dict[str, Any]) -> int:
        """input_tokens of count_tokens(model, **params), cached by the canonical JSON of the call."""
        canonical = json.dumps({"model": self.model, **params}, sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        path = self._folder / digest[:2] / digest
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            if self.replay:
                raise NotCachedError(f"replay mode: no cached token count {digest[:12]} for {self.model}; "
                                     "run once with --longctx-cache on") from None
        if self._client is None:
            import anthropic

            self._client = anthropic.Anthropic(max_retries=0)  # retried by the loop every backend shares
        result = self._retrier.run_blocking(lambda: self._client.messages.count_tokens(model=self.model, **params),
                                            verdict)
        count = int(result.input_tokens)
        atomic_write_text(path, str(count))
        return count

    def count(self, text: str) -> int:
        """Tokens of ``text`` inside a message: its message's count less the overhead of a one-token message."""
        if not text:
            return 0
        if self._overhead is None:
            self._overhead = self._counted({"messages": [{"role": "user", "content": "."}]}) - 1
        return max(0, self._counted({"messages": [{"role": "user", "content": text}]}) - self._overhead)

    def count_request(self, request: Request) -> int:
        """Exactly what the API will bill as input for ``request`` (messages, prefill and system)."""
        params = build_params(self.model, request, temperature=False, cache=False)
        return self._counted({k: params[k] for k in ("messages", "system") if k in params})


def describe(exc: BaseException) -> str:
    """One short line for an SDK exception: the API's own error message, not the raw body's repr."""
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        code = getattr(exc, "error_code", None)
        detail = f"{getattr(exc, 'status_code', '?')} {error.get('type', 'error')}" + (f" {code}" if code else "")
        text = f"{type(exc).__name__} ({detail}): {error['message']}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]
