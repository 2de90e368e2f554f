"""What the run's money bought, for the record: usage from the ledger, a budget's purchase, a sequential stop's saving.

The record's ``usage`` (and each model's record's) is the run's ledger (``dispatch/ledger.py``): requests, tokens and
dollars as sent, each request at the price of the model it called; response-cache hits stay counted apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_longctx.dispatch.ledger import Ledger, as_usage, totals
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY
from pytest_longctx.session.money import price_words
from pytest_longctx.session.sequential_looks import SEQ_KEY


def account(config: pytest.Config, record: dict[str, Any], models: Mapping[str, dict[str, Any]]) -> None:
    """The record's (and each model's record's) usage from the run's ledger: requests, tokens and dollars as
    sent, whatever the trials saw (response-cache hits stay counted apart, at $0: ``cache_hits``)."""
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
    if models:  # the run's trials are every model's (the run's record is the reference's copy)
        usage["trials"] = sum(int((r.get("usage") or {}).get("trials", len(r.get("trials", [])))) for r in
                              models.values())
    if record.get("models"):
        cost = record["models"].setdefault("cost", {})
        planned = (record.get("plan") or {}).get("models") or {}
        for spec in record["models"].get("order") or []:
            cost[spec] = {**(cost.get(spec) or {}), **per_model.get(spec, as_usage({}))}
            if spec in planned:  # a plan: what each model's requests would cost (price unknown: None)
                row = planned[spec]
                cost[spec].update(calls=int(row["requests"]), usd=row.get("est_max_cost_usd"), planned=True,
                                  billed_input_tokens=int(row["billed_input_tokens"]),
                                  paid_output_tokens=int(row["max_output_tokens"]))
    saving = sequential_saving(config, record, usage)
    if saving is not None:
        usage["sequential"] = saving
    notes = config.stash[RUN_KEY].notes
    if saving is not None and saving["skipped_trials"]:
        notes.append(saving_words(saving))
    for spec, words in usage["prices"].items():
        if words not in ("free",):
            notes.append(f"prices: {spec} {words}")
    if (bought := budget_words(usage)) is not None:
        notes.append(bought)


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


def sequential_saving(config: pytest.Config, record: Mapping[str, Any],
                      usage: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a sequential run settled, skipped and saved: the trials of the design it did not run, at the dollars
    per answered trial it paid (None without a sequential gate)."""
    seq = config.stash.get(SEQ_KEY, None)
    done = record.get("sequential")
    if seq is None or not done or not seq.sizes:
        return None
    planned = sum(seq.sizes.values())
    answered = int(done.get("trials_answered", 0))
    skipped = max(0, planned - len(record.get("trials") or []))
    spent = float(usage.get("usd", 0.0)) + float(usage.get("abandoned_usd", 0.0))
    per_trial = spent / answered if answered else 0.0
    return {"groups_completed": int(done.get("groups_completed", 0)), "groups_planned": int(done["groups_planned"]),
            "planned_trials": planned, "answered_trials": answered, "skipped_trials": skipped,
            "spent_usd": round(spent, 6), "saved_usd": round(skipped * per_trial, 2),
            "settled": [{"threshold": a.get("threshold"), "settled": a.get("settled"),
                         "settled_at_group": a.get("settled_at_group"), "skipped_trials": a.get("skipped_trials", 0)}
                        for a in done.get("alarms") or []]}


def saving_words(saving: Mapping[str, Any]) -> str:
    """``sequential: settled after 6 of 20 sample groups; 280 of 400 trials skipped, about $3.10 saved (...)``."""
    settled = "; ".join(f"'{a['threshold']}' {a['settled'] or 'not settled'}"
                        + (f" at group {a['settled_at_group']}" if a.get("settled_at_group") is not None else "")
                        for a in saving["settled"])
    return (f"sequential: {saving['groups_completed']} of {saving['groups_planned']} sample groups looked at "
            f"({settled}); {saving['skipped_trials']:,} of {saving['planned_trials']:,} trials skipped, about "
            f"${saving['saved_usd']:,.2f} saved at the ${saving['spent_usd']:,.2f} the "
            f"{saving['answered_trials']:,} answered ones cost")
