"""Plan / dry run: sum what a run would send, and estimate its cost, without sending anything."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pytest_longctx.backends.models import parse_model_spec
from pytest_longctx.backends.prompt_cache import BATCH_DISCOUNT, WRITE_FACTOR_1H, billed_input, min_cacheable_tokens


class PlanTally:
    """Requests, tokens and prompt-cache shares per model, added up as planned requests arrive.

    The controller keeps this instead of every planned request: a plan of 19,750 requests holds one row per model
    and the identities of the prefixes already seen.
    """

    def __init__(self) -> None:
        self.trials = 0
        self._models: dict[str, dict[str, Any]] = {}
        self._seen: set[tuple[str, str]] = set()

    def add(self, e: dict[str, Any]) -> None:
        """Count one planned request (a ``ModelClient`` plan entry)."""
        self.trials += 1
        m = self._models.setdefault(e["model"], {"requests": 0, "cached": 0, "input_tokens": 0,
                                                 "max_output_tokens": 0, "tokenizers": set(), "cache_write_tokens": 0,
                                                 "cache_read_tokens": 0, "prefix_groups": 0})
        m["cached" if e["cached"] else "requests"] += 1
        if not e["cached"]:
            m["input_tokens"] += int(e["input_tokens"] or 0)  # None: not counted (the prefetch child's plan)
            m["max_output_tokens"] += int(e["max_tokens"])
            prefix, tokens = e.get("prefix"), int(e.get("prefix_tokens") or 0)
            if prefix and tokens >= min_cacheable_tokens(e["model"]):
                first = (e["model"], prefix) not in self._seen
                self._seen.add((e["model"], prefix))
                m["prefix_groups"] += first
                m["cache_write_tokens" if first else "cache_read_tokens"] += tokens
        m["tokenizers"].add(e["tokenizer"])

    def summary(self) -> dict[str, Any]:
        """Requests, input tokens and estimated cost per model; cached requests cost nothing.

        With prompt caching (requests that mark a shared prefix), the first uncached request of each prefix writes
        it (1.25x), the others read it (0.1x); a prefix under the model's minimum is plain input. ``input_tokens``
        stays the uncached figure; ``billed_input_tokens`` is what the estimate charges, in plain-input tokens.

        Batches (``est_batch_cost_usd``): every token at half price, and shared prefixes with the 1-hour lifetime the
        batch path sends (writes 2x, reads 0.1x; ``batch_billed_input_tokens``), beside the same batch without prompt
        caching (``est_batch_uncached_cost_usd``). It counts one write per prefix, as for live runs; cache hits
        inside a batch are best effort (its requests run in any order, some at once), so this is what the cache can
        save.
        """
        out = {}
        for model, m in sorted(self._models.items()):
            profile = parse_model_spec(model).profile
            plain = m["input_tokens"] - m["cache_write_tokens"] - m["cache_read_tokens"]
            billed = billed_input(plain, m["cache_write_tokens"], m["cache_read_tokens"])
            batch_billed = billed_input(plain, m["cache_write_tokens"], m["cache_read_tokens"], WRITE_FACTOR_1H)
            uncached_in = m["input_tokens"] / 1e6 * profile.input_price
            cost_in = billed / 1e6 * profile.input_price
            cost_out = m["max_output_tokens"] / 1e6 * profile.output_price
            out[model] = {**m, "tokenizers": sorted(m["tokenizers"]), "billed_input_tokens": round(billed),
                          "est_uncached_input_cost_usd": round(uncached_in, 4),
                          "est_input_cost_usd": round(cost_in, 4),
                          "est_max_cost_usd": round(cost_in + cost_out, 4),
                          "batch_billed_input_tokens": round(batch_billed),
                          "est_batch_cost_usd": round((batch_billed / 1e6 * profile.input_price + cost_out)
                                                      * BATCH_DISCOUNT, 4),
                          "est_batch_uncached_cost_usd": round((uncached_in + cost_out) * BATCH_DISCOUNT, 4)}
        return {"models": out, "trials": self.trials,
                "note": "one request per trial is planned; calls that depend on an answer (a judge) are not included"}

def summarize_plan(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """:meth:`PlanTally.summary` of ``entries``."""
    tally = PlanTally()
    for e in entries:
        tally.add(e)
    return tally.summary()


def format_plan(plan: dict[str, Any]) -> list[str]:
    lines = []
    for model, m in plan["models"].items():
        lines.append(f"{model}: {m['requests']} requests to send ({m['cached']} already cached), "
                     f"{m['input_tokens']:,} input tokens ({', '.join(m['tokenizers'])}), "
                     f"<= {m['max_output_tokens']:,} output tokens; est. cost ${m['est_input_cost_usd']:.2f} input, "
                     f"<= ${m['est_max_cost_usd']:.2f} total (${m['est_batch_cost_usd']:.2f} with batches)")
        if m.get("prefix_groups"):
            lines.append(f"{model}: prompt cache: {m['prefix_groups']:,} shared prefixes written "
                         f"({m['cache_write_tokens']:,} tokens at 1.25x), {m['cache_read_tokens']:,} tokens read at "
                         f"0.1x; billed input {m['billed_input_tokens']:,} of {m['input_tokens']:,} uncached "
                         f"({m['billed_input_tokens'] / max(1, m['input_tokens']):.3f}; uncached input "
                         f"${m['est_uncached_input_cost_usd']:.2f})")
            saved = m["est_batch_uncached_cost_usd"] - m["est_batch_cost_usd"]
            lines.append(f"{model}: with batches: <= ${m['est_batch_cost_usd']:.2f} with the 1-hour prompt cache "
                         f"(half price; writes 2x, reads 0.1x: billed input {m['batch_billed_input_tokens']:,}) "
                         f"against <= ${m['est_batch_uncached_cost_usd']:.2f} uncached: ${saved:.2f} saved "
                         f"({saved / max(1e-9, m['est_batch_uncached_cost_usd']):.0%})")
    lines.append(plan["note"])
    return lines


def read_plan(plan_file: Path) -> Iterator[dict[str, Any]]:
    """The planned requests the child plan run wrote (one JSON object a line)."""
    with plan_file.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)
