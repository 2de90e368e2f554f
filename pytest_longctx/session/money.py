"""The money options read together: --longctx-prices, --longctx-budget and the window they bound.

A budget needs a price for every model the run calls (the models under test and the judge): a model genai-prices
does not know and no ``--longctx-prices`` entry prices is a one-line usage error, never a family's guess. The
model's real window (genai-prices', or an override's ``@WINDOW``) is the default ``--longctx-context-window`` and
its upper bound: a sweep cannot ask for more context than the model takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_longctx.backends import Price, parse_prices, source_text
from pytest_longctx.errors import UsageError

if TYPE_CHECKING:
    from pytest_longctx.backends.model_spec import ModelSpec
    from pytest_longctx.session.option_def import OptionDef


def check_money(raw: Mapping[str, Any], by: Mapping[str, OptionDef], models: Sequence[ModelSpec], model: ModelSpec,
                judge: ModelSpec, window_given: int | None, budget: float | None) -> tuple[dict[str, Price], int]:
    """The price overrides and the context window (``window_given``: --longctx-context-window, parsed); a one-line
    usage error for a bad combination."""
    prices = parse_prices(raw["prices"], by["prices"].flag)
    own = prices.get(model.spec)
    real = own.context_window if own is not None and own.context_window else model.profile.context_window
    known = (own is not None and own.context_window is not None) or (
        model.profile.price is not None and model.profile.price.context_window is not None)
    if window_given is None:
        window = real
    else:
        window = window_given
        if known and window > real:
            raise UsageError(f"{by['context-window'].flag}: {window:,} tokens is more than {model.spec}'s window of "
                             f"{real:,} ({_where(own)}); give at most {real:,}")
    if budget is not None:
        for spec in dict.fromkeys((*models, model, judge)):
            if spec.spec not in prices and spec.profile.price is None:
                raise UsageError(f"{by['budget'].flag}: the price of {spec.spec} is unknown ({source_text()} does not "
                                 f"list it); give it with {by['prices'].flag} {spec.spec}=IN/OUT (USD per million "
                                 "tokens)")
    return prices, window


def _where(override: Price | None) -> str:
    return "--longctx-prices" if override is not None and override.context_window else source_text()


def price_words(price: Price | None) -> str:
    """``$3.00/$15.00 per million tokens in/out (genai-prices 0.2.3 (claude-sonnet-4-5))``, or ``price unknown``."""
    if price is None:
        return "price unknown"
    if price.free:
        return "free"
    return f"${price.rates.input:,.2f}/${price.rates.output:,.2f} per million tokens in/out ({price.source})"
