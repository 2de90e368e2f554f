"""Any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, llama.cpp, Ollama, OpenAI).

Plain httpx, no SDK. The endpoint comes from ``OPENAI_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``)
and the key from ``OPENAI_API_KEY`` (optional for local servers; never logged or cached). Tokens are
counted by the server's ``/tokenize`` when it has one (llama.cpp, vLLM), else approximated with
tiktoken's cl100k_base, and :attr:`OpenAIBackend.tokenizer` says which.

Requests go through the retry loop every backend shares (:mod:`pytest_longctx.backends.retry`): the
same attempts and backoff as ``anthropic/*``, AIMD on 429, a one-line stop of the run on 401/403 or
an exhausted quota, and on an endpoint that cannot be reached.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import httpx

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.http import Clients, apost_json, json_object, judge, post_json
from pytest_longctx.backends.retry import Retrier, RetryPolicy
from pytest_longctx.errors import BackendError, FatalBackendError, UsageError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Environment variables naming the endpoint and the key.
URL_VAR, KEY_VAR = "OPENAI_BASE_URL", "OPENAI_API_KEY"
#: "1": count with the server's ``/tokenize``; "0": with tiktoken. Set by the controller after probing once,
#: so every process of a run (xdist workers, the plan child) sizes contexts with the same tokenizer.
TOKENIZE_ENV = "LONGCTX_OPENAI_TOKENIZE"
#: Answers meaning "this server has no usable /tokenize" (as opposed to "no answer yet").
_NO_TOKENIZE = frozenset({400, 404, 405, 422, 501})
#: OpenAI's ``finish_reason`` in the stop-reason vocabulary the other backends use.
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal", "tool_calls": "tool_use"}
_APPROXIMATE = " (approximate)"


def missing_key_message() -> str | None:
    """One line when a run would call api.openai.com without a key; None otherwise (a local server needs none)."""
    if os.environ.get(KEY_VAR) or os.environ.get(URL_VAR):
        return None
    return (f"{KEY_VAR} is not set: export your key to run openai/* models on api.openai.com, or set {URL_VAR} "
            "to your OpenAI-compatible server (vLLM, llama.cpp, Ollama; a local one needs no key)")


def settle_tokenizer(model: str) -> Callable[[], None] | None:
    """Probe the server's ``/tokenize`` once, on the controller, before any other process starts.

    Workers and the plan child inherit the answer (``$LONGCTX_OPENAI_TOKENIZE``), so they all size contexts
    with the same tokenizer even when the server is too busy to answer a probe quickly. A user's own value
    wins (None: nothing settled); an unreachable server is left to the trials (they stop the run, naming it),
    a dead endpoint or a refused key raises :class:`FatalBackendError`. Returns the cleanup that forgets this
    run's answer, so the next in-process run probes again.
    """
    if os.environ.get(TOKENIZE_ENV) in ("0", "1"):
        return None
    backend = OpenAIBackend(model)
    try:
        os.environ[TOKENIZE_ENV] = "1" if backend.server_tokenizes() else "0"
    except FatalBackendError:
        raise
    except BackendError:
        return None
    finally:
        backend.close_sync()

    def forget() -> None:
        os.environ.pop(TOKENIZE_ENV, None)

    return forget


def chat_messages(request: Request) -> list[dict[str, str]]:
    """OpenAI-style messages: system first, then the turns, then the prefill as an assistant turn."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages += [{"role": m.role, "content": m.content} for m in request.messages]
    if request.prefill:
        messages.append({"role": "assistant", "content": request.prefill})
    return messages


def build_chat_body(model: str, request: Request) -> dict[str, Any]:
    """The ``/chat/completions`` body for ``request`` (pure: tested without network)."""
    if request.choices:
        raise UsageError("scoring choices by likelihood needs a local model (provider 'local'), not 'openai'")
    body: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(request),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if request.stop:
        body["stop"] = list(request.stop)
    return body


def parse_chat_answer(data: dict[str, Any], request: Request, what: str) -> Completion:
    """A Completion from a ``/chat/completions`` answer; the prefill is never part of ``text``."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise BackendError(f"{what}: answer has no choices: {str(data)[:300]}") from None
    text = (choice.get("message") or {}).get("content") or ""
    if request.prefill and text.startswith(request.prefill):
        text = text[len(request.prefill) :]  # llama.cpp echoes the prefill, vLLM does not
    usage = data.get("usage") or {}
    finish = choice.get("finish_reason")
    return Completion(
        text=text,
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        stop_reason=_STOP_REASONS.get(finish, finish),
    )


class OpenAIBackend:
    """provider ``openai``: an OpenAI-compatible chat endpoint over plain httpx."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        context_window: int = 32_768,
        base_url: str | None = None,
        api_key: str | None = None,
        tokenize: bool | None = None,
        timeout_s: float = 600.0,
        policy: RetryPolicy | None = None,
        max_concurrency: int = 16,
        seed: int = 0,
    ) -> None:
        """``tokenize``: use the server's ``/tokenize`` (True), tiktoken (False), or ``$LONGCTX_OPENAI_TOKENIZE``,
        else probe once (None)."""
        self.model = model
        self.context_window = context_window
        self.base_url = (base_url or os.environ.get(URL_VAR) or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get(KEY_VAR)
        env = os.environ.get(TOKENIZE_ENV, "")
        self._tokenize = tokenize if tokenize is not None or env not in ("0", "1") else env == "1"
        self._clients = Clients(httpx.Timeout(timeout_s, connect=10.0), httpx.Timeout(60.0, connect=5.0))
        self.retrier = Retrier(f"openai/{model}", self.base_url, policy, seed=seed, max_concurrency=max_concurrency,
                               hint=f"; set {URL_VAR} to a running OpenAI-compatible server")
        self._tiktoken: Any = None

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"  # never the key

    @property
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    @property
    def _key_hint(self) -> str:
        return f" (check {KEY_VAR})" if self._api_key else f" ({KEY_VAR} is not set: the server wants a key)"

    @property
    def tokenize_url(self) -> str:
        """The server's ``/tokenize`` (llama.cpp and vLLM serve it beside ``/v1``)."""
        return self.base_url.removesuffix("/v1") + "/tokenize"

    async def complete(self, request: Request) -> Completion:
        body = build_chat_body(self.model, request)
        start = time.perf_counter()
        data = await apost_json(self._clients.async_client(), f"{self.base_url}/chat/completions", body,
                                retrier=self.retrier, headers=self._headers, key_hint=self._key_hint)
        completion = parse_chat_answer(data, request, f"openai/{self.model} at {self.base_url}")
        completion.latency_s = time.perf_counter() - start
        return completion

    @property
    def tokenizer(self) -> str:
        if self.server_tokenizes():
            return f"openai/{self.model}"
        from pytest_longctx.corpus.tokens import TIKTOKEN_NAME

        return TIKTOKEN_NAME + _APPROXIMATE

    def count_tokens(self, text: str) -> int:
        if self.server_tokenizes():
            data = post_json(self._clients.blocking_client(), self.tokenize_url, _tokenize_body(self.model, text),
                             retrier=self.retrier, headers=self._headers, key_hint=self._key_hint)
            return _token_count(data)
        if self._tiktoken is None:
            from pytest_longctx.corpus.tokens import TiktokenCounter

            self._tiktoken = TiktokenCounter()
        return int(self._tiktoken.count(text))

    async def aclose(self) -> None:
        await self._clients.aclose()

    def close_sync(self) -> None:
        """Close the blocking client (token counting); :meth:`aclose` closes both."""
        self._clients.close_blocking()

    def server_tokenizes(self) -> bool:
        """Whether tokens are counted by the server's ``/tokenize`` (probed once; an unreachable server raises)."""
        if self._tokenize is None:
            self._tokenize = "api.openai.com" not in self.base_url and self._probe_tokenize()
        return bool(self._tokenize)

    def _probe_tokenize(self) -> bool:
        """Ask ``/tokenize`` once through the retry loop: a 4xx answer means it has none (tiktoken then counts);
        no answer at all is a failure, never a silent switch of tokenizer."""

        def attempt() -> dict[str, Any] | None:
            response = self._clients.blocking_client().post(self.tokenize_url, json=_tokenize_body(self.model, "probe"),
                                                headers=self._headers)
            return None if response.status_code in _NO_TOKENIZE else json_object(response)

        data = self.retrier.run_blocking(attempt, lambda exc: judge(exc, key_hint=self._key_hint))
        try:
            return data is not None and _token_count(data) > 0
        except (KeyError, TypeError, ValueError):
            return False


def _tokenize_body(model: str, text: str) -> dict[str, Any]:
    # llama.cpp reads "content", vLLM reads "prompt"; each ignores the other's fields.
    return {"model": model, "content": text, "prompt": text, "add_special": False, "add_special_tokens": False}


def _token_count(data: dict[str, Any]) -> int:
    if "count" in data:
        return int(data["count"])
    return len(data["tokens"])
