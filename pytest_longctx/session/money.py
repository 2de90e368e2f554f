"""The money options read together: --longctx-prices, --longctx-budget and the window they bound.

A budget needs a price for every model the run calls (the models under test and the judge): a model genai-prices
does not know and no ``--longctx-prices`` entry prices is a one-line usage error, never a family's guess. The
model's real window (genai-prices', or an override's ``@WINDOW``) is the default ``--longctx-context-window`` and
its upper bound: a sweep cannot ask for more context than the model takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_longctx.backends.prices import Price, parse_prices, source_text
from pytest_longctx.errors import UsageError

if TYPE_CHECKING:
    from pytest_longctx.backends.models import ModelSpec
    from pytest_longctx.session.option_def import OptionDef


def check_money(raw: Mapping[str, Any], by: Mapping[str, OptionDef], models: Sequence[ModelSpec], model: ModelSpec,
                judge: ModelSpec) -> tuple[dict[str, Price], int, float | None]:
    """The price overrides, the context window and the budget; a one-line usage error for a bad combination."""
    from pytest_longctx.session.options import _dollars, _int

    prices = parse_prices(raw["prices"], by["prices"].flag)
    budget = _dollars(by["budget"], raw["budget"])
    own = prices.get(model.spec)
    real = own.context_window if own is not None and own.context_window else model.profile.context_window
    known = (own is not None and own.context_window is not None) or (
        model.profile.price is not None and model.profile.price.context_window is not None)
    if raw["context-window"] is None:
        window = real
    else:
        window = _int(by["context-window"], raw["context-window"], 256)
        if known and window > real:
            raise UsageError(f"{by['context-window'].flag}: {window:,} tokens is more than {model.spec}'s window of "
                             f"{real:,} ({_where(own)}); give at most {real:,}")
    if budget is not None:
        for spec in dict.fromkeys((*models, model, judge)):
            if spec.spec not in prices and spec.profile.price is None:
                raise UsageError(f"{by['budget'].flag}: the price of {spec.spec} is unknown ({source_text()} does not "
                                 f"list it); give it with {by['prices'].flag} {spec.spec}=IN/OUT (USD per million "
                                 "tokens)")
    return prices, window, budget


def _where(override: Price | None) -> str:
    return "--longctx-prices" if override is not None and override.context_window else source_text()


def price_words(price: Price | None) -> str:
    """``$3.00/$15.00 per million tokens in/out (genai-prices 0.2.3 (claude-sonnet-4-5))``, or ``price unknown``."""
    if price is None:
        return "price unknown"
    if price.free:
        return "free"
    return f"${price.rates.input:,.2f}/${price.rates.output:,.2f} per million tokens in/out ({price.source})"


def account(config: Any, record: dict[str, Any], models: Mapping[str, dict[str, Any]]) -> None:
    """The record's (and each model's record's) usage from the run's ledger: requests, tokens and dollars as
    sent, whatever the trials saw (response-cache hits stay counted apart, at $0: ``cache_hits``)."""
    from pytest_longctx.dispatch.ledger import Ledger, as_usage, totals
    from pytest_longctx.session.keys import SETTINGS_KEY, SHARED_KEY

    ledger = Ledger.beside(config.stash[SHARED_KEY].stop_file)
    if ledger is None:
        return
    state = ledger.read()
    settings = config.stash[SETTINGS_KEY]
    per_model = {spec: as_usage(entry) for spec, entry in sorted(state["models"].items())}
    for spec, model_record in models.items():
        mine = per_model.get(spec, as_usage({}))
        model_record["usage"] = {**(model_record.get("usage") or {}), **mine, "ledger": True}
    whole = totals(state)
    usage = record.setdefault("usage", {})
    usage.update(as_usage(whole), ledger=True, models=per_model)
    budget = state.get("budget")
    prices = {spec: price_words(settings.price(spec)) for spec in dict.fromkeys((*settings.models, settings.model,
                                                                                   settings.judge))}
    usage["prices"] = {spec.spec: words for spec, words in prices.items()}
    if budget is not None:
        usage["budget"] = {"usd": budget, "spent_usd": round(whole["usd"] + whole["abandoned_usd"], 6),
                           "stopped": state.get("stop"), "refused": int(whole["refused"]),
                           "answered": int(whole["answered"])}
    if record.get("models"):
        cost = record["models"].setdefault("cost", {})
        for spec in record["models"].get("order") or []:
            cost[spec] = {**(cost.get(spec) or {}), **per_model.get(spec, as_usage({}))}


def budget_words(usage: Mapping[str, Any]) -> str | None:
    """``the $5.00 budget bought 123 answers ($4.87); stopped: ...``, or None without a budget."""
    budget = usage.get("budget")
    if not budget:
        return None
    text = (f"the ${float(budget['usd']):,.2f} budget bought {int(budget['answered']):,} answers "
            f"(${float(budget['spent_usd']):,.2f})")
    if budget.get("stopped"):
        text += f"; {int(budget['refused']):,} requests refused: {budget['stopped']}"
    return text
