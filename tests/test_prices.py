"""Model facts from genai-prices (``backends/prices.py``): list prices (tiers, cache, batch) and context windows,
read offline from the package's bundled snapshot; overrides; "price unknown" instead of a guess."""

from __future__ import annotations

import datetime as dt
import socket
from typing import Any

import pytest
from genai_prices import Usage
from genai_prices.data_snapshot import get_snapshot

from pytest_longctx.backends.model_spec import parse_model_spec
from pytest_longctx.backends.prices import parse_prices, price_of
from pytest_longctx.dispatch.plan import PlanTally
from pytest_longctx.errors import UsageError

MODELS = ("claude-sonnet-4-5", "claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5", "claude-sonnet-5-5",
          "claude-opus-5-5", "claude-haiku-5-5")
USAGES = [(1_000, 0, 0, 100), (150_000, 0, 0, 500), (250_000, 0, 0, 500), (40_000, 30_000, 0, 64),
          (10_000, 0, 190_000, 64), (5_000, 240_000, 0, 10)]  # uncached, written, read, output


def genai_usd(model: str, uncached: int, written: int, read: int, output: int) -> float:
    """genai-prices' own price of one request (its ``input_tokens`` count cache writes and reads too)."""
    _, info = get_snapshot().find_provider_model(model, None, "anthropic", None)
    usage = Usage(input_tokens=uncached + written + read, cache_write_tokens=written, cache_read_tokens=read,
                  output_tokens=output)
    return float(info.get_prices(dt.datetime.now(dt.UTC)).calc_price(usage)["total_price"])


@pytest.mark.parametrize("model", MODELS)
def test_a_request_costs_what_genai_prices_says_tiers_and_cache_included(model: str) -> None:
    price = price_of("anthropic", model)
    assert price is not None and price.source.startswith("genai-prices 0.2.3")
    for uncached, written, read, output in USAGES:
        assert price.usd(uncached, output, written, read) == pytest.approx(
            genai_usd(model, uncached, written, read, output), rel=1e-12, abs=1e-12), (uncached, written, read)
        batch = price.usd(uncached, output, written, read, batch=True)
        assert batch == pytest.approx(price.usd(uncached, output, written, read) / 2)  # genai-prices has no batch


def test_current_list_prices_and_windows_are_the_sources() -> None:
    sonnet_55 = parse_model_spec("anthropic/claude-sonnet-5-5").profile
    assert sonnet_55.context_window == 1_000_000 and (sonnet_55.input_price, sonnet_55.output_price) == (2.0, 10.0)
    assert sonnet_55.price is not None and sonnet_55.price.rates.cache_read == 0.1
    assert sonnet_55.price.usd(0, 0, 0, 1_000_000, batch=True) == pytest.approx(0.05)  # reads 0.05x in batches
    opus_45 = parse_model_spec("anthropic/claude-opus-4-5").profile
    assert (opus_45.input_price, opus_45.output_price, opus_45.context_window) == (5.0, 25.0, 200_000)
    haiku = parse_model_spec("anthropic/claude-haiku-4-5").profile
    assert (haiku.input_price, haiku.output_price) == (1.0, 5.0)


def test_an_unknown_model_has_no_price_not_a_familys_guess() -> None:
    assert price_of("anthropic", "claude-test") is None
    assert parse_model_spec("anthropic/claude-sonnet-test").profile.price is None
    assert price_of("fake", "perfect").free and price_of("local", "smollm2-135m").free  # type: ignore[union-attr]


def test_prices_are_read_without_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("genai-prices tried to reach the network")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    get_snapshot.__globals__["_bundled_snapshot"].cache_clear()  # read again, now offline
    price = price_of("anthropic", "claude-opus-5-5")
    assert price is not None and (price.rates.input, price.rates.output) == (4.0, 20.0)
    assert not get_snapshot().from_auto_update  # the bundled data, never an update


def test_overrides_parse_and_bad_ones_are_one_line_usage_errors() -> None:
    prices = parse_prices("anthropic/claude-test=3/15, anthropic/claude-x=2/10/2.5/0.1@1_000_000")
    test, x = prices["anthropic/claude-test"], prices["anthropic/claude-x"]
    assert (test.rates.input, test.rates.output, test.rates.cache_write) == (3, 15, 3.75)
    assert test.rates.cache_read == pytest.approx(0.3)
    assert (x.rates.cache_write, x.rates.cache_read, x.context_window) == (2.5, 0.1, 1_000_000)
    for bad in ("claude-test=3/15", "anthropic/claude-test=3", "anthropic/claude-test=3/x", "anthropic/a=1/2@9",
                "anthropic/a=1/2/3", "anthropic/a=-1/2"):
        with pytest.raises(UsageError, match=r"^--longctx-prices: expected provider/name=IN/OUT"):
            parse_prices(bad)


def test_the_plan_prices_a_request_at_the_list_price_and_says_price_unknown() -> None:
    tally = PlanTally()
    entry = {"model": "anthropic/claude-sonnet-4-5", "cached": False, "input_tokens": 250_000, "max_tokens": 500,
             "tokenizer": "tiktoken/cl100k_base"}
    tally.add(entry)
    tally.add({**entry, "model": "anthropic/claude-test", "input_tokens": 1_000})
    rows = tally.summary()["models"]
    assert rows["anthropic/claude-sonnet-4-5"]["est_max_cost_usd"] == pytest.approx(
        genai_usd("claude-sonnet-4-5", 250_000, 0, 0, 500), abs=1e-4)  # the tier past 200K: $6/$22.50
    assert rows["anthropic/claude-test"]["est_max_cost_usd"] is None and rows["anthropic/claude-test"]["price"] is None


BUDGETED = '''
import pytest

pytestmark = pytest.mark.longctx("demo")


async def test_one(longctx):
    longctx.record(expected=1, answer=1)
'''


@pytest.mark.parametrize(("args", "words"), [
    (("--longctx-model", "anthropic/claude-test", "--longctx-budget", "5"),
     "--longctx-budget: the price of anthropic/claude-test is unknown (genai-prices 0.2.3 does not list it); give it "
     "with --longctx-prices anthropic/claude-test=IN/OUT"),
    (("--longctx-model", "anthropic/claude-sonnet-4-5", "--longctx-context-window", "300000"),
     "--longctx-context-window: 300,000 tokens is more than anthropic/claude-sonnet-4-5's window of 200,000"),
    (("--longctx-model", "anthropic/claude-x", "--longctx-prices", "anthropic/claude-x=1/2@100000",
      "--longctx-context-window", "100001"), "anthropic/claude-x's window of 100,000 (--longctx-prices)"),
    (("--longctx-model", "anthropic/claude-test", "--longctx-prices", "claude-test=1/2"),
     "--longctx-prices: expected provider/name=IN/OUT"),
])
def test_money_options_refuse_what_cannot_be_priced(pytester: pytest.Pytester, args: tuple[str, ...],
                                                    words: str) -> None:
    pytester.makepyfile(test_budget=BUDGETED)
    result = pytester.runpytest_inprocess("-p", "no:xdist", "--longctx-cache", "off", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert words in result.stderr.str()


def test_an_override_prices_a_budget_and_the_window_defaults_to_the_models(pytester: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_longctx.session.keys import SETTINGS_KEY

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    pytester.makepyfile(test_budget=BUDGETED)
    config = pytester.parseconfigure("--longctx-model", "anthropic/claude-test", "--longctx-budget", "5",
                                     "--longctx-prices", "anthropic/claude-test=3/15@500000")
    s = config.stash[SETTINGS_KEY]
    assert s.context_window == 500_000 and s.price(s.model) is not None and s.budget == 5
    config = pytester.parseconfigure("--longctx-model", "anthropic/claude-sonnet-5-5")
    assert config.stash[SETTINGS_KEY].context_window == 1_000_000  # a 1M model's sweep can reach 1M
