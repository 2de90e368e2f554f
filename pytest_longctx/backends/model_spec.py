"""Model specs (``provider/name``) and their profiles.

Parsing a spec never imports an SDK: the registry (``registry.py``) maps provider names to
``module:Class`` strings that are imported only when a backend is actually built.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_longctx.backends.prices import Price, price_of
from pytest_longctx.backends.registry import PROVIDERS
from pytest_longctx.errors import UsageError


@dataclass(frozen=True)
class Profile:
    """Facts about a model family that any experiment may size its defaults by; none names an experiment.

    ``runs``: where the model runs: ``in-process`` (a scripted test double), ``cpu`` (a small model on this
    machine's CPU: slow, short window) or ``remote`` (an API). ``default_samples``: trials per cell of an
    experiment that declares no default of its own (see the ``pytest_longctx_defaults`` hook).
    """

    context_window: int
    default_samples: int
    runs: str = "remote"
    #: List prices and window from genai-prices (``backends/prices.py``); None: price unknown (a run's
    #: ``--longctx-prices`` may still price it: ``Settings.price``).
    price: Price | None = None

    @property
    def input_price(self) -> float:
        """USD per million input tokens (0 when free or unknown: see :attr:`price`)."""
        return self.price.rates.input if self.price is not None else 0.0

    @property
    def output_price(self) -> float:
        """USD per million output tokens (0 when free or unknown)."""
        return self.price.rates.output if self.price is not None else 0.0


FAKE_NAMES = ("perfect", "random", "wrong", "error", "flaky")
LOCAL_NAMES = ("smollm2-135m",)

#: The window of a remote model genai-prices does not know (Anthropic's smallest current window, 2026-11; a
#: ``--longctx-prices ...@WINDOW`` override or --longctx-context-window sets the real one).
UNKNOWN_WINDOW = 200_000


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``provider/name``."""

    provider: str
    name: str

    @property
    def spec(self) -> str:
        return f"{self.provider}/{self.name}"

    @property
    def profile(self) -> Profile:
        if self.provider == "fake":
            return Profile(context_window=200_000, default_samples=40, runs="in-process",
                           price=price_of(self.provider, self.name))
        if self.provider == "local":
            return Profile(context_window=8192, default_samples=1, runs="cpu", price=price_of(self.provider, self.name))
        price = price_of(self.provider, self.name)
        if self.provider == "anthropic":
            window = price.context_window if price is not None and price.context_window else UNKNOWN_WINDOW
            return Profile(context_window=window, default_samples=20, price=price)
        window = price.context_window if price is not None and price.context_window else 32_768
        return Profile(context_window=window, default_samples=20, price=price)


def parse_model_spec(text: str, *, flag: str = "--longctx-model") -> ModelSpec:
    """Parse and validate ``provider/name``; unknown providers or names are one-line usage errors."""
    provider, sep, name = text.strip().partition("/")
    valid = ", ".join(f"{p}/..." for p in PROVIDERS)
    if not sep or not provider or not name:
        raise UsageError(f"{flag}: expected provider/name, got {text!r} (providers: {valid})")
    if provider not in PROVIDERS:
        raise UsageError(f"{flag}: unknown provider {provider!r} in {text!r}; valid: {valid}")
    if provider == "fake" and name not in FAKE_NAMES:
        raise UsageError(f"{flag}: unknown fake model {name!r}; valid: {', '.join('fake/' + n for n in FAKE_NAMES)}")
    if provider == "local" and name not in LOCAL_NAMES:
        raise UsageError(f"{flag}: unknown local model {name!r}; valid: {', '.join('local/' + n for n in LOCAL_NAMES)}")
    if provider == "anthropic" and not name.startswith("claude"):
        raise UsageError(f"{flag}: {text!r} is not a Claude model id (expected anthropic/claude-...)")
    return ModelSpec(provider, name)
