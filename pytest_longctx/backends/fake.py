"""Built-in fake models for tests and demos: no network, deterministic per request.

The fake needs to know the right answer, so callers pass an :class:`Oracle` beside the request
(never part of the request or its cache key). Real backends ignore it.

* ``fake/perfect`` answers the oracle's ideal output.
* ``fake/random`` picks uniformly among the ideal output and its wrong alternatives, seeded by
  the request's hash: chance level, identical on every run and every worker.
* ``fake/wrong`` always picks a wrong alternative (or says it does not know).
* ``fake/error`` raises BackendError (an infrastructure failure, never a wrong answer).
* ``fake/flaky`` raises BackendError for about 30% of requests (seeded) and answers perfectly otherwise.
"""

from __future__ import annotations

import random

from pytest_longctx.backends.base import Completion, Oracle, Request, request_key
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import BackendError

__all__ = ["FakeBackend", "Oracle", "model_note"]


def model_note(name: str) -> str:
    """What ``fake/<name>`` is, for the run's header and report."""
    return f"a built-in test double that answers from each trial's expected answer ({name}), not a language model"


class FakeBackend:
    """A scripted model; see the module docstring for the names."""

    provider = "fake"

    def __init__(self, name: str, context_window: int = 200_000) -> None:
        self.model = name
        self.context_window = context_window
        self._counter = TiktokenCounter()

    @property
    def tokenizer(self) -> str:
        return self._counter.name

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    async def complete(self, request: Request, oracle: Oracle | None = None) -> Completion:
        rng = random.Random(request_key(self.provider, self.model, request))
        if self.model == "error" or (self.model == "flaky" and rng.random() < 0.3):
            raise BackendError(f"fake/{self.model}: injected backend failure")
        if oracle is None:
            text = "I don't know."
        elif self.model in ("perfect", "flaky"):
            text = oracle.answer
        elif self.model == "random":
            text = rng.choice((oracle.answer, *oracle.wrong))
        else:
            text = rng.choice(oracle.wrong) if oracle.wrong else "I don't know."
        stop_reason = "end_turn"
        for stop in request.stop:  # like a real model: generation ends before a stop sequence
            if stop in text:
                text, stop_reason = text[: text.index(stop)], "stop_sequence"
        # Usage of a fake model is an estimate (4 characters a token), so fake runs stay fast.
        chars = request.prompt_chars() + len(request.prefill or "")
        return Completion(text=text, input_tokens=max(1, chars // 4), output_tokens=max(1, len(text) // 4),
                          stop_reason=stop_reason)

    async def aclose(self) -> None:
        return None
