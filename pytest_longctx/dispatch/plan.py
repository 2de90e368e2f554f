"""Plan / dry run: sum what a run would send, and estimate its cost, without sending anything."""

from __future__ import annotations

from typing import Any

from pytest_longctx.backends.models import parse_model_spec
from pytest_longctx.session.options import Settings


def summarize_plan(entries: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """Requests, input tokens and estimated cost per model; cached requests cost nothing."""
    by_model: dict[str, dict[str, Any]] = {}
    for e in entries:
        m = by_model.setdefault(e["model"], {"requests": 0, "cached": 0, "input_tokens": 0, "max_output_tokens": 0,
                                             "tokenizers": set()})
        m["cached" if e["cached"] else "requests"] += 1
        if not e["cached"]:
            m["input_tokens"] += int(e["input_tokens"])
            m["max_output_tokens"] += int(e["max_tokens"])
        m["tokenizers"].add(e["tokenizer"])
    out = {}
    for model, m in sorted(by_model.items()):
        profile = parse_model_spec(model).profile
        cost_in = m["input_tokens"] / 1e6 * profile.input_price
        cost_out = m["max_output_tokens"] / 1e6 * profile.output_price
        out[model] = {**m, "tokenizers": sorted(m["tokenizers"]), "est_input_cost_usd": round(cost_in, 4),
                      "est_max_cost_usd": round(cost_in + cost_out, 4),
                      "est_batch_cost_usd": round((cost_in + cost_out) / 2, 4)}
    return {"models": out, "trials": len(entries),
            "note": "one request per trial is planned; calls that depend on an answer (a judge) are not included"}


def format_plan(plan: dict[str, Any]) -> list[str]:
    lines = []
    for model, m in plan["models"].items():
        lines.append(f"{model}: {m['requests']} requests to send ({m['cached']} already cached), "
                     f"{m['input_tokens']:,} input tokens ({', '.join(m['tokenizers'])}), "
                     f"<= {m['max_output_tokens']:,} output tokens; est. cost ${m['est_input_cost_usd']:.2f} input, "
                     f"<= ${m['est_max_cost_usd']:.2f} total (${m['est_batch_cost_usd']:.2f} with batches)")
    lines.append(plan["note"])
    return lines
