"""provider ``local``: a GGUF model behind the shared llama.cpp server (see ``local_server``).

Each request is rendered with the model's own chat template by the server (``/apply-template``;
a prefill becomes a trailing assistant turn that the template leaves open) and completed with
the native ``/completion`` endpoint, which continues exactly that text and reports why it stopped
(end of turn, stop sequence, token limit), the prompt and answer token counts, and, for
``Request.choices``, the log-probability of candidate next tokens.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import httpx

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.http import Clients, apost_json, post_json
from pytest_longctx.backends.local_models import DEFAULT_LOCAL_MODEL, KNOWN_MODELS
from pytest_longctx.backends.local_server import URL_ENV
from pytest_longctx.backends.openai_compat import chat_messages
from pytest_longctx.backends.retry import Retrier, RetryPolicy
from pytest_longctx.errors import BackendError, UsageError

#: llama.cpp's ``stop_type`` in the stop-reason vocabulary the other backends use.
_STOP_REASONS = {"eos": "end_turn", "word": "stop_sequence", "limit": "max_tokens"}
#: ``stop_reason`` of a completion whose answer was chosen by likelihood, not generated.
CHOICES_STOP_REASON = "choices"


class LocalBackend:
    """A local model served by :class:`~pytest_longctx.backends.local_server.LocalModelServer`."""

    provider = "local"

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        context_window: int | None = None,
        base_url: str | None = None,
        timeout_s: float = 900.0,
        policy: RetryPolicy | None = None,
        top_logprobs: int = 64,
        max_concurrency: int = 16,
        seed: int = 0,
    ) -> None:
        """``base_url`` defaults to ``$PYTEST_LONGCTX_LOCAL_URL`` (set by the plugin's controller)."""
        self.model = model
        known = KNOWN_MODELS.get(model)
        self.context_window = context_window or (known.context_window if known else 4096)
        self._base_url = (base_url or os.environ.get(URL_ENV) or "").rstrip("/") or None
        self._clients = Clients(httpx.Timeout(timeout_s, connect=10.0), httpx.Timeout(120.0, connect=5.0),
                                trust_env=False)
        self.retrier = Retrier(f"local/{model}", self._base_url or "(no server)", policy, seed=seed,
                               max_concurrency=max_concurrency,
                               hint="; the plugin starts the server itself unless " + URL_ENV + " names one")
        self.top_logprobs = top_logprobs
        self._token_ids: dict[str, int] = {}
        self._n_vocab: int | None = None

    def __repr__(self) -> str:
        return f"LocalBackend(model={self.model!r}, base_url={self._base_url!r})"

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise BackendError(
                f"no local model server for local/{self.model}: the plugin starts one; elsewhere run "
                f"`python -m pytest_longctx.backends.local_server {self.model}` and set {URL_ENV}"
            )
        return self._base_url

    @property
    def tokenizer(self) -> str:
        return f"local/{self.model}"

    async def complete(self, request: Request) -> Completion:
        start = time.perf_counter()
        prompt = await self.render(request)
        if request.choices:
            completion = await self._score_choices(prompt, request)
        else:
            body: dict[str, Any] = {
                "prompt": prompt,
                "n_predict": request.max_tokens,
                "temperature": request.temperature,
                "stop": list(request.stop),
                "cache_prompt": True,
            }
            data = await self._apost("/completion", body)
            if not isinstance(data.get("content"), str):
                raise BackendError(f"local/{self.model}: answer without content: {str(data)[:300]}")
            completion = Completion(
                text=data["content"],
                input_tokens=int(data.get("tokens_evaluated") or 0),
                output_tokens=int(data.get("tokens_predicted") or 0),
                stop_reason=_STOP_REASONS.get(data.get("stop_type", ""), data.get("stop_type")),
            )
        completion.latency_s = time.perf_counter() - start
        return completion

    async def render(self, request: Request) -> str:
        """The prompt text the model sees: the request through the model's chat template."""
        data = await self._apost("/apply-template", {"messages": chat_messages(request)})
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            raise BackendError(f"local/{self.model}: /apply-template gave no prompt: {str(data)[:300]}")
        return prompt

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's own tokenizer (the server's ``/tokenize``)."""
        if not text:
            return 0
        data = post_json(self._clients.blocking_client(), f"{self.base_url}/tokenize",
                         {"content": text, "add_special": False}, retrier=self.retrier)
        return len(data.get("tokens") or ())

    async def aclose(self) -> None:
        await self._clients.aclose()

    async def _score_choices(self, prompt: str, request: Request) -> Completion:
        """Log-probability of each choice as the next token after ``prompt`` (which ends with the prefill).

        A choice is scored as one token, spelled the way it would follow the prompt: as is after
        whitespace (the open assistant turn ends with a newline), else with a leading space
        (``Answer:`` + `` B``) when that is one token (some tokenizers split `` 5`` into two, and
        then ``5`` is the next token). The candidates are distinct tokens, so their probabilities
        sum to at most 1.
        """
        lead = "" if not prompt or prompt[-1].isspace() else " "
        ids = {choice: await self._choice_token(lead, choice) for choice in request.choices}
        if len(set(ids.values())) != len(ids):
            raise UsageError(f"choices {list(request.choices)} are not distinct tokens for local/{self.model}")
        body = {
            "prompt": prompt,
            "n_predict": 1,
            "temperature": 0.0,
            "n_probs": self.top_logprobs,
            "cache_prompt": True,
        }
        data = await self._apost("/completion", body)
        found = _next_token_logprobs(data)
        if not all(i in found for i in ids.values()):  # rare: ask again for the whole vocabulary
            data = await self._apost("/completion", {**body, "n_probs": await self._vocab_size()})
            found = _next_token_logprobs(data)
        missing = [c for c, i in ids.items() if i not in found]
        if missing:
            raise BackendError(f"local/{self.model}: server gave no log-probability for choices {missing}")
        logprobs = {choice: found[ids[choice]] for choice in request.choices}
        best = max(request.choices, key=lambda c: logprobs[c])  # ties: the first listed
        return Completion(
            text=best,
            input_tokens=int(data.get("tokens_evaluated") or 0),
            output_tokens=int(data.get("tokens_predicted") or 0),
            stop_reason=CHOICES_STOP_REASON,
            choice_logprobs=logprobs,
        )

    async def _choice_token(self, lead: str, choice: str) -> int:
        """The single token spelling ``lead + choice``, else ``choice``; UsageError if neither is one."""
        for text in dict.fromkeys((lead + choice, choice)):
            if text not in self._token_ids:
                data = await self._apost("/tokenize", {"content": text, "add_special": False})
                tokens = data.get("tokens") or []
                self._token_ids[text] = int(tokens[0]) if len(tokens) == 1 else -1
            if self._token_ids[text] >= 0:
                return self._token_ids[text]
        raise UsageError(
            f"choice {choice!r} is more than one token for local/{self.model}; "
            "likelihood scoring needs single-token choices such as A, B, C, D"
        )

    async def _vocab_size(self) -> int:
        if self._n_vocab is None:
            try:
                response = await self._clients.async_client().get(f"{self.base_url}/v1/models")
                self._n_vocab = int(response.json()["data"][0]["meta"]["n_vocab"])
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
                raise BackendError(f"local/{self.model}: no vocabulary size from /v1/models: {exc!r}") from None
        return self._n_vocab

    async def _apost(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await apost_json(self._clients.async_client(), f"{self.base_url}{path}", body, retrier=self.retrier)


def _next_token_logprobs(data: dict[str, Any]) -> dict[int, float]:
    """token id -> log-probability of the first generated position's candidates."""
    try:
        candidates = data["completion_probabilities"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        return {}
    found: dict[int, float] = {}
    for entry in candidates:
        logprob = float(entry.get("logprob", -math.inf))
        if math.isfinite(logprob):
            found[int(entry["id"])] = logprob
    return found
