"""The ``longctx`` fixture's object: one trial of one condition cell.

A test asks the model through :meth:`Trial.ask`, notes what it expected and what it got, and
asserts correctness with a plain ``assert``. The plugin turns the outcome into a trial record.
"""

from __future__ import annotations

import enum
import hashlib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.backends.base import Completion, Oracle, Request
from pytest_longctx.dispatch.client import ModelClient

#: Raw model output kept in a record is cut to this many characters.
RAW_LIMIT = 4000


def plain(value: Any) -> Any:
    """A JSON-safe copy of a condition value (numpy scalars, enums, paths become plain values).

    The result holds exact builtin types only: execnet cannot send subclasses such as
    ``numpy.float64`` or ``numpy.str_`` from a worker, even though they pass ``isinstance`` checks.
    """
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return plain(value.value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return plain(item())
        except (TypeError, ValueError):
            pass
    for kind in (bool, int, float, str):  # other subclasses of builtins
        if isinstance(value, kind):
            return kind(value)
    return str(value)


def trial_seed(seed: int, experiment: str, params: dict[str, Any], sample: int) -> int:
    """Per-trial seed from the run seed and the trial's identity (not its file or worker)."""
    text = json.dumps([seed, experiment, params, sample], sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass
class Trial:
    """One trial: its identity, its seeded RNG, the model client, and what it recorded."""

    experiment: str
    params: dict[str, Any]
    sample: int
    seed: int
    client: ModelClient
    nodeid: str
    run_seed: int = 0
    expected: Any = None
    answer: Any = None
    item: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    completions: list[Completion] = field(default_factory=list)
    raw: str = ""
    #: What the fake models may answer, from :meth:`expect` (real models never see it).
    oracle: Oracle | None = None
    #: Several --longctx-model: the model this trial asks, stamped on its record (None: the run's one model).
    model_key: str | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    @property
    def model(self) -> str:
        return self.client.spec

    def count_tokens(self, text: str) -> int:
        """Tokens under the model's tokenizer (approximation named in ``tokenizer``)."""
        return self.client.backend.count_tokens(text)

    @property
    def tokenizer(self) -> str:
        return self.client.backend.tokenizer

    @property
    def context_window(self) -> int:
        return self.client.backend.context_window

    def expect(self, expected: Any, *, says: str | None = None, wrong: Iterable[Any] = ()) -> None:
        """Declare the right answer once, before asking: it is recorded as ``expected``.

        The built-in fake models (``fake/perfect``, ``fake/random``, ...) answer from it, so a test
        needs no test scaffolding in its method: ``says`` is what an ideal reply looks like (default:
        the expected value as text) and ``wrong`` are plausible wrong replies. Real models never see it.
        """
        self.expected = plain(expected)
        self.oracle = Oracle(says if says is not None else str(expected), tuple(str(w) for w in wrong))

    async def ask(self, request: Request | str, *, oracle: Oracle | None = None,
                  client: ModelClient | None = None) -> str:
        """Send one request (a string is a single user turn) and return the answer text.

        ``client`` sends it to another model (e.g. a judge); its usage is counted in this trial
        but its output is not taken as the trial's raw answer. ``oracle`` overrides :meth:`expect`
        for this request (e.g. what a fake judge says).
        """
        if isinstance(request, str):
            request = Request.user(request)
        if oracle is None and client is None:
            oracle = self.oracle
        completion = await (client or self.client).complete(request, oracle, scope=(self.experiment, self.params))
        self.completions.append(completion)
        text = (request.prefill or "") + completion.text
        if client is None:
            self.raw = text
        return text

    def record(self, **fields: Any) -> None:
        """Note ``expected``, ``answer``, ``item`` or any other detail for the report."""
        for name in ("expected", "answer", "item"):
            if name in fields:
                setattr(self, name, plain(fields.pop(name)))
        self.detail.update(plain(fields))

    def to_record(self, outcome: str, *, reason: str | None = None, error: str | None = None) -> dict[str, Any]:
        """The plain-JSON record sent from worker to controller."""
        return {
            "nodeid": self.nodeid,
            "experiment": self.experiment,
            "params": self.params,
            "sample": self.sample,
            "seed": self.seed,
            "outcome": outcome,
            "item": self.item,
            "expected": self.expected,
            "answer": self.answer,
            "raw": self.raw[:RAW_LIMIT],
            "reason": reason,
            "error": error,
            "calls": sum(1 for c in self.completions if not c.cache_hit),  # requests actually sent
            "cache_hits": sum(1 for c in self.completions if c.cache_hit),
            "input_tokens": sum(c.input_tokens for c in self.completions),
            "output_tokens": sum(c.output_tokens for c in self.completions),
            "paid_input_tokens": sum(c.input_tokens for c in self.completions if not c.cache_hit),
            "paid_output_tokens": sum(c.output_tokens for c in self.completions if not c.cache_hit),
            # of paid_input_tokens: written to / read from the provider's prompt cache (billed 1.25x / 0.1x)
            "cache_creation_input_tokens": sum(c.cache_creation_input_tokens for c in self.completions
                                               if not c.cache_hit),
            "cache_read_input_tokens": sum(c.cache_read_input_tokens for c in self.completions if not c.cache_hit),
            "latency_s": round(sum(c.latency_s for c in self.completions), 4),
            "detail": self.detail,
            **({"model": self.model_key} if self.model_key is not None else {}),
        }
