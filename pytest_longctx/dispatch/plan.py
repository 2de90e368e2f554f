"""Plan / dry run: sum what a run would send, and estimate its cost, without sending anything."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pytest_longctx.backends import Price, price_of
from pytest_longctx.backends.prompt_cache import READ_FACTOR, WRITE_FACTOR, WRITE_FACTOR_1H, min_cacheable_tokens
from pytest_longctx.dispatch.policy import PlannedRequest

#: A judge call the plan cannot build (its prompt holds the model's answer): assumed input tokens and output cap.
JUDGE_INPUT_TOKENS = 200
JUDGE_MAX_TOKENS = 32
_COSTS = ("usd_input", "usd_max", "usd_uncached_input", "usd_batch", "usd_batch_uncached")


class PlanTally:
    """Requests, tokens, prompt-cache shares and dollars per model, added up as planned requests arrive.

    The controller keeps this instead of every planned request: a plan of 19,750 requests holds one row per model
    and the identities of the prefixes already seen. Each request is priced as it arrives, at the price of the
    model it calls (``prices``: genai-prices or ``--longctx-prices``, set when the run starts; None: price unknown),
    tiers included. A trial that takes the judge fixture adds one judge call to ``judge``'s row (its prompt holds
    the answer, so it is sized by :data:`JUDGE_INPUT_TOKENS` and :data:`JUDGE_MAX_TOKENS`: an estimate).
    """

    def __init__(self) -> None:
        self.trials = 0
        self._models: dict[str, dict[str, Any]] = {}
        self._seen: set[tuple[str, str]] = set()
        #: Each model's price (by spec; a model not in it is priced by genai-prices, None: unknown).
        self.prices: dict[str, Price | None] = {}
        #: The judge model's spec (the plan adds a judge call per trial that takes the judge fixture).
        self.judge: str | None = None

    def _row(self, model: str) -> dict[str, Any]:
        return self._models.setdefault(model, {"requests": 0, "cached": 0, "input_tokens": 0, "max_output_tokens": 0,
                                               "tokenizers": set(), "cache_write_tokens": 0, "cache_read_tokens": 0,
                                               "prefix_groups": 0, "judge_requests": 0, **dict.fromkeys(_COSTS, 0.0)})

    def price(self, model: str) -> Price | None:
        if model not in self.prices:
            provider, _, name = model.partition("/")
            self.prices[model] = price_of(provider, name)
        return self.prices[model]

    def add(self, e: dict[str, Any]) -> None:
        """Count one planned request (a ``ModelClient`` plan entry)."""
        self.trials += 1
        m = self._row(e["model"])
        m["cached" if e["cached"] else "requests"] += 1
        if not e["cached"]:
            tokens = int(e["input_tokens"] or 0)  # None: not counted (the prefetch child's plan)
            m["input_tokens"] += tokens
            m["max_output_tokens"] += int(e["max_tokens"])
            prefix, shared = e.get("prefix"), int(e.get("prefix_tokens") or 0)
            written = read = 0
            if prefix and shared >= min_cacheable_tokens(e["model"]):
                first = (e["model"], prefix) not in self._seen
                self._seen.add((e["model"], prefix))
                m["prefix_groups"] += first
                m["cache_write_tokens" if first else "cache_read_tokens"] += shared
                written, read = (shared, 0) if first else (0, shared)
            self._price(m, e["model"], tokens - written - read, int(e["max_tokens"]), written, read)
        m["tokenizers"].add(e["tokenizer"])
        if e.get("judge") and not e["cached"] and self.judge is not None:
            j = self._row(self.judge)
            j["judge_requests"] += 1
            j["requests"] += 1
            j["input_tokens"] += JUDGE_INPUT_TOKENS
            j["max_output_tokens"] += JUDGE_MAX_TOKENS
            self._price(j, self.judge, JUDGE_INPUT_TOKENS, JUDGE_MAX_TOKENS, 0, 0)

    def _price(self, m: dict[str, Any], model: str, plain: int, out: int, written: int, read: int) -> None:
        """Add one request's dollars: live (input only, and at most with its whole output), uncached, batched."""
        price = self.price(model)
        if price is None:
            m["price_unknown"] = True
            return
        m["usd_input"] += price.usd(plain, 0, written, read)
        m["usd_max"] += price.usd(plain, out, written, read)
        m["usd_uncached_input"] += price.usd(plain + written + read, 0)
        m["usd_batch"] += price.usd(plain, out, written, read, ttl_1h=True, batch=True)
        m["usd_batch_uncached"] += price.usd(plain + written + read, out, batch=True)

    def summary(self) -> dict[str, Any]:
        """Requests, input tokens and estimated cost per model; cached requests cost nothing.

        With prompt caching (requests that mark a shared prefix), the first uncached request of each prefix writes
        it (the model's cache-write price), the others read it (its cache-read price); a prefix under the model's
        minimum is plain input. ``input_tokens`` stays the uncached figure; ``billed_input_tokens`` is what the
        estimate charges, in plain-input tokens at the model's own multiples (usually writes 1.25x, reads 0.1x).

        Batches (``est_batch_cost_usd``): every token at half price, and shared prefixes with the 1-hour lifetime the
        batch path sends (its write price; ``batch_billed_input_tokens`` at 2x), beside the same batch without prompt
        caching (``est_batch_uncached_cost_usd``). It counts one write per prefix, as for live runs; cache hits
        inside a batch are best effort (its requests run in any order, some at once), so this is what the cache can
        save. A model whose price is unknown has ``price`` None and no dollars.
        """
        out = {}
        for model, m in sorted(self._models.items()):
            price = self.price(model)
            plain = m["input_tokens"] - m["cache_write_tokens"] - m["cache_read_tokens"]
            write, write_1h, read = _factors(price)
            billed = plain + write * m["cache_write_tokens"] + read * m["cache_read_tokens"]
            batch_billed = plain + write_1h * m["cache_write_tokens"] + read * m["cache_read_tokens"]
            row = {k: v for k, v in m.items() if k not in _COSTS and k != "price_unknown"}
            known = price is not None
            out[model] = {**row, "tokenizers": sorted(m["tokenizers"]), "billed_input_tokens": round(billed),
                          "price": price.to_json() if price is not None else None,
                          "est_uncached_input_cost_usd": round(m["usd_uncached_input"], 4) if known else None,
                          "est_input_cost_usd": round(m["usd_input"], 4) if known else None,
                          "est_max_cost_usd": round(m["usd_max"], 4) if known else None,
                          "batch_billed_input_tokens": round(batch_billed),
                          "est_batch_cost_usd": round(m["usd_batch"], 4) if known else None,
                          "est_batch_uncached_cost_usd": round(m["usd_batch_uncached"], 4) if known else None}
        judged = sum(m["judge_requests"] for m in self._models.values())
        note = ("one request per trial is planned, and one judge call per trial that takes the judge fixture "
                f"({judged:,} here, each sized {JUDGE_INPUT_TOKENS} input / {JUDGE_MAX_TOKENS} output tokens: its "
                "prompt holds the answer, so an estimate)")
        return {"models": out, "trials": self.trials, "note": note}


def summarize_plan(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """:meth:`PlanTally.summary` of ``entries``."""
    tally = PlanTally()
    for e in entries:
        tally.add(e)
    return tally.summary()


def _factors(price: Price | None) -> tuple[float, float, float]:
    """The model's cache write (5-minute, 1-hour) and read prices as multiples of its input price (the usual
    1.25x, 2x and 0.1x when unknown or free)."""
    if price is None or not price.rates.input:
        return WRITE_FACTOR, WRITE_FACTOR_1H, READ_FACTOR
    r = price.rates
    return r.cache_write / r.input, r.cache_write_1h / r.input, r.cache_read / r.input


def _usd(value: float | None) -> str:
    return "price unknown" if value is None else f"${value:,.2f}"


def format_plan(plan: dict[str, Any]) -> list[str]:
    lines = []
    for model, m in plan["models"].items():
        price = m.get("price")
        source = f"; prices: {price['source']}" if price and price.get("source") and not price.get("free") else ""
        judge = f", {m['judge_requests']:,} of them judge calls" if m.get("judge_requests") else ""
        cost = (f"est. cost {_usd(m['est_input_cost_usd'])} input, <= {_usd(m['est_max_cost_usd'])} total "
                f"({_usd(m['est_batch_cost_usd'])} with batches){source}" if price is not None
                else "price unknown: give it with --longctx-prices MODEL=IN/OUT")
        lines.append(f"{model}: {m['requests']} requests to send ({m['cached']} already cached{judge}), "
                     f"{m['input_tokens']:,} input tokens ({', '.join(m['tokenizers']) or 'estimated'}), "
                     f"<= {m['max_output_tokens']:,} output tokens; {cost}")
        if m.get("prefix_groups") and price is not None:
            write, write_1h, read = _factors(Price.from_json(price))
            lines.append(f"{model}: prompt cache: {m['prefix_groups']:,} shared prefixes written "
                         f"({m['cache_write_tokens']:,} tokens at {write:.3g}x), {m['cache_read_tokens']:,} tokens "
                         f"read at {read:.3g}x; billed input {m['billed_input_tokens']:,} of {m['input_tokens']:,} "
                         "uncached "
                         f"({m['billed_input_tokens'] / max(1, m['input_tokens']):.3f}; uncached input "
                         f"${m['est_uncached_input_cost_usd']:.2f})")
            saved = m["est_batch_uncached_cost_usd"] - m["est_batch_cost_usd"]
            lines.append(f"{model}: with batches: <= ${m['est_batch_cost_usd']:.2f} with the 1-hour prompt cache "
                         f"(half price; writes {write_1h:.3g}x, reads {read:.3g}x: billed input "
                         f"{m['batch_billed_input_tokens']:,}) "
                         f"against <= ${m['est_batch_uncached_cost_usd']:.2f} uncached: ${saved:.2f} saved "
                         f"({saved / max(1e-9, m['est_batch_uncached_cost_usd']):.0%})")
    lines.append(plan["note"])
    if (total := gate_cost_line(plan)) is not None:
        lines.append(total)
    return lines


def gate_cost(plan: dict[str, Any]) -> dict[str, Any] | None:
    """What the sequential gate's whole run costs (None without a sequential plan or a price): the requests no
    alarm covers in full, plus each alarm's mean (and 95th-percentile) dollars to its decision, per case. The
    95th percentile of the sum is at most the sum of the alarms' (they stop apart): that bound is given."""
    alarms = (plan.get("sequential") or {}).get("alarms") or []
    costs = [m.get("est_max_cost_usd") for m in plan["models"].values()]
    if not alarms or any(c is None for c in costs):
        return None
    whole = float(sum(c for c in costs if c is not None))
    rest = max(0.0, whole - sum(float(a["usd"]) for a in alarms))
    cases: dict[str, dict[str, float]] = {}
    for alarm in alarms:
        for name, case in alarm["cases"].items():
            entry = cases.setdefault(name, {"usd_mean": rest, "usd_p95": rest})
            entry["usd_mean"] += float(case["usd_mean"])
            entry["usd_p95"] += float(case["usd_p95"])
    rounded = {n: {k: round(v, 2) for k, v in c.items()} for n, c in cases.items()}
    return {"whole_usd": round(whole, 2), "cases": rounded}


def gate_cost_line(plan: dict[str, Any]) -> str | None:
    """``this gate run costs about $X (p95 $Y) if nothing changed, ...``: the whole sequential run in one line."""
    cost = gate_cost(plan)
    if cost is None:
        return None
    parts = [f"${c['usd_mean']:,.2f} (p95 ${c['usd_p95']:,.2f}) " + ("if nothing changed" if name == "no change"
                                                                      else f"at a {name.replace(' ', ' of ', 1)}")
             for name, c in cost["cases"].items()]
    return (f"this gate run costs about {parts[0]}" + "".join(f", {p}" for p in parts[1:])
            + f"; the whole design ${cost['whole_usd']:,.2f} (list prices, at most the output cap)")


def read_plan(plan_file: Path) -> Iterator[PlannedRequest]:
    """The planned requests the child plan run wrote (one JSON object a line), with their line in the plan."""
    with plan_file.open(encoding="utf-8") as fh:
        for number, line in enumerate(text for text in fh if text.strip()):
            yield PlannedRequest.from_plan(json.loads(line), number)
