"""What a model costs and how long its window is: from the maintained ``genai-prices`` data, or an override.

Prices (USD per million tokens: input, output, prompt-cache writes (5-minute and 1-hour) and reads) and context
windows come from the ``genai-prices`` package's bundled snapshot (pinned in pyproject; its date is
:data:`SOURCE`). Its auto-update (``UpdatePrices``) is never started: nothing is fetched at run time. A price the
data gives in tiers (e.g. a higher rate for every token of a request past 200,000 input tokens) is kept in tiers
and applied as genai-prices does (the whole request at the tier's rate). genai-prices has no batch prices:
Message Batches cost half of every rate (Anthropic's batch discount, :data:`BATCH_DISCOUNT`).

An override (``--longctx-prices`` / ini ``longctx_prices``) prices a private contract or a model the data does
not know: ``provider/name=IN/OUT[/CACHE_WRITE/CACHE_READ][@WINDOW]`` (USD per million tokens; cache writes default
to 1.25x input, reads to 0.1x, 1-hour writes to 2x; ``@WINDOW`` its context window in tokens), several separated
by commas. A model neither knows has no price (``None``): the run says "price unknown", never a family's guess.
Models that run here (``fake/*``, ``local/*``) are free.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.errors import UsageError

#: The batch API's price as a fraction of the list price (Anthropic: half; genai-prices carries no batch prices).
BATCH_DISCOUNT = 0.5
#: Where prices and windows come from (the bundled snapshot of this genai-prices release).
SOURCE_PACKAGE = "genai-prices"
#: Providers whose models run on this machine or in-process: free.
FREE_PROVIDERS = ("fake", "local")
_RATES = ("input", "output", "cache_write", "cache_write_1h", "cache_read")
_GENAI_FIELDS = {"input": "input_mtok", "output": "output_mtok", "cache_write": "cache_write_mtok",
                 "cache_write_1h": "cache_write_1h_mtok", "cache_read": "cache_read_mtok"}


@dataclass(frozen=True)
class Rates:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_write_1h: float
    cache_read: float

    @classmethod
    def of_input(cls, inp: float, out: float, write: float | None = None, read: float | None = None) -> Rates:
        """Rates from input and output prices; cache writes 1.25x, 1-hour writes 2x, reads 0.1x unless given."""
        return cls(inp, out, 1.25 * inp if write is None else write, 2.0 * inp, 0.1 * inp if read is None else read)

    def to_json(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in _RATES}


@dataclass(frozen=True)
class Price:
    """A model's list prices (tiers by a request's input tokens) and context window, with where they came from."""

    model: str
    rates: Rates
    #: (start, rates): a request with more than ``start`` input tokens (cache included) pays ``rates`` throughout.
    tiers: tuple[tuple[int, Rates], ...] = ()
    source: str = ""
    context_window: int | None = None
    free: bool = field(default=False)

    def rates_for(self, input_tokens: int) -> Rates:
        """The rates of a request with ``input_tokens`` input tokens in all (the highest tier it passes)."""
        chosen = self.rates
        for start, rates in self.tiers:
            if input_tokens > start:
                chosen = rates
        return chosen

    def usd(self, uncached: int, output: int, written: int = 0, read: int = 0, *, ttl_1h: bool = False,
            batch: bool = False) -> float:
        """Dollars of one request: ``uncached`` input tokens sent in full, ``written`` / ``read`` prompt-cache
        writes and reads, ``output`` output tokens (``ttl_1h``: writes at the 1-hour rate; ``batch``: half)."""
        r = self.rates_for(uncached + written + read)
        write = r.cache_write_1h if ttl_1h else r.cache_write
        total = (uncached * r.input + written * write + read * r.cache_read + output * r.output) / 1e6
        return total * (BATCH_DISCOUNT if batch else 1.0)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "rates": self.rates.to_json(),
                "tiers": [[start, rates.to_json()] for start, rates in self.tiers], "source": self.source,
                "context_window": self.context_window, "free": self.free}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Price:
        return cls(str(data["model"]), Rates(**data["rates"]),
                   tuple((int(s), Rates(**r)) for s, r in data.get("tiers") or ()), str(data.get("source", "")),
                   data.get("context_window"), bool(data.get("free", False)))


def source_text() -> str:
    """``genai-prices 0.2.3`` (the installed release, whose bundled snapshot is used)."""
    from importlib.metadata import version

    return f"{SOURCE_PACKAGE} {version(SOURCE_PACKAGE)}"


def _genai_rates(model_price: Any) -> tuple[Rates, tuple[tuple[int, Rates], ...]]:
    """Base rates and tiers of a genai-prices ``ModelPrice`` (missing cache rates: the input rate's multiples)."""
    raw = {name: getattr(model_price, attr, None) for name, attr in _GENAI_FIELDS.items()}
    starts = sorted({int(t.start) for v in raw.values() if v is not None and hasattr(v, "tiers") for t in v.tiers})

    def at(value: Any, tokens: int) -> float | None:
        if value is None:
            return None
        if not hasattr(value, "tiers"):
            return float(value)
        price = value.base
        for tier in value.tiers:
            if tokens > tier.start:
                price = tier.price
        return float(price)

    def rates(tokens: int) -> Rates:
        got = {name: at(value, tokens) for name, value in raw.items()}
        inp, out = got["input"] or 0.0, got["output"] or 0.0
        base = Rates.of_input(inp, out)
        filled = [float(v) if (v := got[n]) is not None else float(getattr(base, n))
                  for n in ("cache_write", "cache_write_1h", "cache_read")]
        return Rates(inp, out, *filled)

    return rates(0), tuple((start, rates(start + 1)) for start in starts)


def genai_price(provider: str, name: str, when: dt.datetime | None = None) -> Price | None:
    """The model's price and window in genai-prices' bundled snapshot (None when it does not know the model)."""
    from genai_prices.data_snapshot import get_snapshot

    try:
        _, info = get_snapshot().find_provider_model(name, None, provider, None)
    except LookupError:
        return None
    base, tiers = _genai_rates(info.get_prices(when or dt.datetime.now(dt.UTC)))
    window = int(info.context_window) if info.context_window else None
    return Price(f"{provider}/{name}", base, tiers, f"{source_text()} ({info.id})", window)


def parse_prices(text: str | None, flag: str = "--longctx-prices") -> dict[str, Price]:
    """``provider/name=IN/OUT[/CACHE_WRITE/CACHE_READ][@WINDOW]``, comma-separated; a bad entry is a usage error."""
    out: dict[str, Price] = {}
    for part in (text or "").replace("\n", ",").split(","):
        entry = part.strip()
        if not entry:
            continue
        model, sep, numbers = entry.partition("=")
        model = model.strip()
        numbers, _, window_text = numbers.partition("@")
        try:
            values = [float(v) for v in numbers.split("/")]
            window = int(window_text.replace("_", "")) if window_text.strip() else None
        except ValueError:
            values, window = [], None
        if not sep or "/" not in model or len(values) not in (2, 4) or any(v < 0 for v in values) or (
                window is not None and window < 256):
            raise UsageError(f"{flag}: expected provider/name=IN/OUT[/CACHE_WRITE/CACHE_READ][@WINDOW] (USD per "
                             f"million tokens), got {entry!r}")
        out[model] = Price(model, Rates.of_input(*values), (), flag, window)
    return out


def price_of(provider: str, name: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``provider/name``: an override, else free (models that run here), else genai-prices; None when
    unknown."""
    spec = f"{provider}/{name}"
    if overrides and spec in overrides:
        return overrides[spec]
    if provider in FREE_PROVIDERS:
        return Price(spec, Rates(0.0, 0.0, 0.0, 0.0, 0.0), (), "free (runs here)", None, free=True)
    return genai_price(provider, name)
