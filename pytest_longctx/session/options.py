"""The core's options (``--longctx-<noun>`` / ini ``longctx_<noun>``), resolved once (CLI > ini > default) into
the run's frozen :class:`~pytest_longctx.run_settings.Settings`.

Values are validated here, so a bad value is a one-line usage error at start-up; the first bad value, in the order
:func:`resolve` reads them, is the one reported. Registering options and bare switches: ``option_group.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from pytest_longctx.backends.model_spec import ModelSpec, parse_model_spec
from pytest_longctx.backends.prompt_cache import caches_prompts
from pytest_longctx.backends.registry import offering, provider_of
from pytest_longctx.errors import UsageError
from pytest_longctx.gate_spec import DEFAULT_ALPHA, DEFAULT_EFFECTIVE_ACCURACY, parse_alpha, parse_threshold, unique
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.option_def import FALSE_WORDS, TRUE_WORDS, OptionDef, parse_bool, parse_int
from pytest_longctx.session.option_group import raw_value, register

DEFAULT_MODEL = "local/smollm2-135m"
CACHE_MODES = ("on", "off", "replay", "refresh")

OPTIONS: tuple[OptionDef, ...] = (
    OptionDef("model", DEFAULT_MODEL, "model under test as provider/name, e.g. fake/perfect, local/smollm2-135m, "
              "anthropic/claude-sonnet-4-5, openai/<name>; repeat it to run every condition for each model and "
              "compare them side by side (docs/several-models.md) (default: %(default)s)", is_list=True),
    OptionDef("reference", None, "with several --longctx-model: the one the others are compared and gated against "
              "(default: the first)"),
    OptionDef("seed", "0", "seed every random choice flows from (default: 0)"),
    OptionDef("samples", None, "trials per condition cell, or 'all': every eligible item in every cell "
              "(default: the model's profile: fake 40, local 1, remote 20)"),
    OptionDef("report-dir", "reports", "where longctx.json, longctx.html and the run history go (default: reports)"),
    OptionDef("threshold", None, "gate expression SELECTOR:CHECK[/READING][/each][@n=N], repeatable; the selector's "
              "cells are pooled: e.g. 'experiment=lrt:max-drop=0' (fail when the data show a drop), "
              "'experiment=qa:min=0.6/shown' (fail unless the data show 0.6), "
              "'experiment=lrt:min-effective-length=32000' (see docs/ci-gating.md) (default: none)", is_list=True),
    OptionDef("alpha", str(DEFAULT_ALPHA), "the gate's false-alarm rate: its alarm checks together fail an "
              "unchanged model at most this often (one-sided tests, Holm across them); 'shown' checks use 1 - alpha "
              f"bounds (default: {DEFAULT_ALPHA})"),
    OptionDef("effective-accuracy", str(DEFAULT_EFFECTIVE_ACCURACY), "accuracy a context length must reach to count "
              f"toward the effective context length (default: {DEFAULT_EFFECTIVE_ACCURACY}, RULER's bar)"),
    OptionDef("detect", None, "with --longctx-plan: also print the samples and the cost needed to detect a drop "
              "of this size (e.g. 0.03) with power 0.8 (default: none)"),
    OptionDef("sequential", "false", "with --longctx-compare and max-drop alarm thresholds: run sample by sample "
              "and stop once every alarm is settled (an anytime-valid betting e-process over items' paired drops; "
              "see docs/ci-gating.md, 'Stopping early') (default: false)", bare="true"),
    OptionDef("sequential-stop", "alarm", "with --longctx-sequential: alarm (once an alarm is settled, the trials "
              "only settled alarms cover are skipped and not sent while the others go on) or run (nothing is skipped "
              "until every alarm is settled) (default: alarm)"),
    OptionDef("budget", None, "stop the run (exit 2, recorded) once its requests cost this many dollars at list "
              "prices; with --longctx-plan, say what that budget can detect (default: none)"),
    OptionDef("prices", None, "prices (and windows) of models genai-prices does not know or that you pay otherwise: "
              "provider/name=IN/OUT[/CACHE_WRITE/CACHE_READ][@WINDOW] in USD per million tokens, comma-separated "
              "(docs/claude.md, 'Prices') (default: genai-prices' list prices)"),
    OptionDef("compare", None, "earlier run record (longctx.json) to compare with and gate against (default: none)"),
    OptionDef("compare-partial", "false", "accept a partial --longctx-compare record (a stopped run, another seed "
              "or protocol, or one lacking some of this run's cells) instead of refusing it at start-up; every "
              "verdict then says the baseline was partial (default: false)", bare="true"),
    OptionDef("cache", "on", "response cache: on, off, replay (fail trials whose response is not cached), "
              "refresh (ignore and overwrite entries) (default: on)"),
    OptionDef("cache-dir", None, "response cache directory shared by all workers (default: .longctx-cache)"),
    OptionDef("max-concurrency", "16", "model requests in flight across all workers (default: 16)"),
    OptionDef("context-window", None, "override the model's usable context window in tokens (default: the model's)"),
    OptionDef("data-dir", None, "folder holding corpora such as FR-<date>.xml; also $LONGCTX_DATA_DIR (default: none)"),
    OptionDef("judge", None, "judge model spec for LLM-as-judge scoring (default: the model under test)"),
    OptionDef("plan", "false", "dry run: build every request, send none, print requests, tokens and cost "
              "(default: false)", bare="true"),
    OptionDef("plan-out", None, "with --longctx-plan: also write every planned request to this JSONL file "
              "(default: none)"),
    OptionDef("prefetch", "auto", "send every request of the run up front with --longctx-max-concurrency in flight, "
              "so tests find their answers cached: auto (remote models with the cache on), on, off (default: auto)"),
    OptionDef("batch", "false", "send the run's requests through the Message Batches API (half price), wait, "
              f"then score; resumable ({offering('batches')} only) (default: false)", bare="true"),
    OptionDef("exact-tokens", "false", "size contexts with the provider's token-counting endpoint instead of "
              f"tiktoken ({offering('token_counting')} only; counts are cached) (default: false)", bare="true"),
    OptionDef("protocol", "longctx", "experiment protocol: source (each experiment as its published source ran "
              "it: prompts, examples, budgets) or longctx (this suite's improved protocol) (default: longctx)"),
    OptionDef("prompt-cache", "auto", "mark the prompt prefix that sibling requests share (e.g. the 8 prompt "
              "variants of a qa cell) with a prompt-cache breakpoint, so it is billed once at 1.25x and then read at "
              "0.1x: on, off, or auto (on for providers with prompt caching: anthropic/*) (default: auto)"),
    OptionDef("gc-freeze", "true", "keep what a process holds after start-up and collection out of Python's full "
              "garbage collections until the run ends (gc.freeze; about a tenth of an LRT sweep's CPU time on 2 cores) "
              "(default: true)", bare="true", negated="false"),
)


def add_options(parser: pytest.Parser) -> None:
    """Register the core's options in the ``longctx`` option group, with their ini twins."""
    register(parser, OPTIONS)


def check_provider_modes(model: ModelSpec, *, prefetch: str, batch: bool, exact_tokens: bool, cache: str) -> None:
    """The one place where a mode the model's provider cannot honour becomes a usage error (one line).
    """
    provider, spec = provider_of(model), model.spec
    if batch and not provider.batches:
        raise UsageError(f"--longctx-batch: only {offering('batches')} models have a batch API, not {spec}; drop it "
                         f"({provider.models} runs live, with --longctx-prefetch for concurrency)")
    if exact_tokens and not provider.token_counting:
        raise UsageError(f"--longctx-exact-tokens: only {offering('token_counting')} models have a token-counting "
                         f"endpoint, not {spec}; drop it ({offering('own_tokenizer')} models always count with their "
                         "own tokenizer)")
    if prefetch == "on" and provider.in_process:
        raise UsageError(f"--longctx-prefetch on: {spec} answers in-process, there is nothing to send up front; "
                         "use auto or off")
    if prefetch == "on" and cache in ("off", "replay"):
        reason = "prefetched answers reach the tests through the cache" if cache == "off" else "replay sends nothing"
        raise UsageError(f"--longctx-prefetch on: {reason}; drop --longctx-cache {cache} or use --longctx-prefetch off")


def resolve(config: pytest.Config) -> Settings:
    """Read every option once; raise UsageError (one line) on the first bad value."""
    raw: dict[str, Any] = {opt.noun: raw_value(config, opt) for opt in OPTIONS}
    by = {opt.noun: opt for opt in OPTIONS}
    from pytest_longctx.session.model_axis import resolve_models

    models, model = resolve_models(config, by["model"], by["reference"])
    judge = parse_model_spec(str(raw["judge"]), flag=by["judge"].flag) if raw["judge"] else model
    samples_all = str(raw["samples"]).strip().lower() == "all"
    samples = (parse_int(by["samples"], raw["samples"], 1) if raw["samples"] is not None and not samples_all
               else model.profile.default_samples)
    from pytest_longctx.session.money import check_money

    window_given = (parse_int(by["context-window"], raw["context-window"], 256) if raw["context-window"] is not None
                    else None)
    budget = _dollars(by["budget"], raw["budget"])
    prices, window = check_money(raw, by, models, model, judge, window_given, budget)
    cache = str(raw["cache"])
    if cache not in CACHE_MODES:
        raise UsageError(f"{by['cache'].flag}: expected one of {', '.join(CACHE_MODES)}, got {cache!r}")
    # the same check twice (or spelled two ways) is one alarm: Holm, the sequential gate and the plan count it once
    thresholds = unique(parse_threshold(t, flag=by["threshold"].flag) for t in (raw["threshold"] or []))
    _check_needs(config, raw, by)
    compare = _compare(by["compare"], raw["compare"])
    modes = _request_modes(raw, by, models, model, cache)
    rootdir = Path(str(config.rootpath))
    return Settings(
        model=model, models=models, judge=judge, seed=parse_int(by["seed"], raw["seed"], 0),
        samples=samples, samples_all=samples_all, samples_given=raw["samples"] is not None and not samples_all,
        report_dir=_under(rootdir, str(raw["report-dir"])), thresholds=thresholds, compare=compare, cache=cache,
        cache_dir=_under(rootdir, str(raw["cache-dir"] or os.environ.get("LONGCTX_CACHE_DIR", ".longctx-cache"))),
        max_concurrency=parse_int(by["max-concurrency"], raw["max-concurrency"], 1), context_window=window,
        data_dir=str(raw["data-dir"]) if raw["data-dir"] else None,
        plan=parse_bool(by["plan"], raw["plan"]), plan_out=Path(str(raw["plan-out"])) if raw["plan-out"] else None,
        prefetch=modes.prefetch, batch=modes.batch, exact_tokens=modes.exact_tokens, protocol=modes.protocol,
        prompt_cache_mode=modes.prompt_cache_mode, prompt_cache=modes.prompt_cache,
        gc_freeze=parse_bool(by["gc-freeze"], raw["gc-freeze"]),
        alpha=parse_alpha(str(raw["alpha"]), flag=by["alpha"].flag),
        effective_accuracy=_rate(by["effective-accuracy"], raw["effective-accuracy"], "e.g. 0.85"),
        detect=_rate(by["detect"], raw["detect"], "a drop such as 0.03") if raw["detect"] is not None else None,
        rootdir=rootdir, compare_partial=parse_bool(by["compare-partial"], raw["compare-partial"]),
        sequential=parse_bool(by["sequential"], raw["sequential"]), budget=budget,
        sequential_stop=_sequential_stop(by["sequential-stop"], raw["sequential-stop"]), prices=tuple(prices.values()),
    )


class RequestModes(NamedTuple):
    """How the run's requests are built and sent: --longctx-protocol, -prefetch, -batch, -exact-tokens and
    -prompt-cache (as given, and what it resolved to for the model under test)."""

    protocol: str
    prefetch: str
    batch: bool
    exact_tokens: bool
    prompt_cache_mode: str
    prompt_cache: bool


def _request_modes(raw: Mapping[str, Any], by: Mapping[str, OptionDef], models: tuple[ModelSpec, ...],
                   model: ModelSpec, cache: str) -> RequestModes:
    """The request modes, each checked against every model's provider and against ``cache`` (``model``: the one
    under test, whose provider decides what --longctx-prompt-cache auto means)."""
    protocol = str(raw["protocol"])
    if protocol not in ("source", "longctx"):
        raise UsageError(f"{by['protocol'].flag}: expected source or longctx, got {protocol!r}")
    prefetch = str(raw["prefetch"]).strip().lower()
    if prefetch not in ("auto", "on", "off"):
        raise UsageError(f"{by['prefetch'].flag}: expected auto, on or off, got {prefetch!r}")
    batch = parse_bool(by["batch"], raw["batch"])
    exact_tokens = parse_bool(by["exact-tokens"], raw["exact-tokens"])
    prompt_cache_mode = str(raw["prompt-cache"]).strip().lower()
    if prompt_cache_mode not in ("on", "off", "auto"):
        raise UsageError(f"{by['prompt-cache'].flag}: expected on, off or auto, got {raw['prompt-cache']!r}")
    for each in models:
        check_provider_modes(each, prefetch=prefetch, batch=batch, exact_tokens=exact_tokens, cache=cache)
    from pytest_longctx.session.model_axis import check_several_modes

    check_several_modes(models, prefetch=prefetch, batch=batch)
    if batch and cache == "off":
        raise UsageError(f"{by['batch'].flag}: batch results are delivered through the cache; drop --longctx-cache off")
    prompt_cache = prompt_cache_mode == "on" or (prompt_cache_mode == "auto" and caches_prompts(model.provider))
    return RequestModes(protocol, prefetch, batch, exact_tokens, prompt_cache_mode, prompt_cache)


def _compare(opt: OptionDef, value: str | None) -> Path | None:
    """--longctx-compare: an earlier run's longctx.json that exists, or None."""
    compare = Path(str(value)) if value else None
    if compare is not None and not compare.is_file():
        what = "is a folder" if compare.is_dir() else "not found"
        raise UsageError(f"{opt.flag}: {compare} {what}; pass an earlier run's longctx.json")
    return compare


def _under(rootdir: Path, value: str) -> Path:
    """A folder option's path: as given when absolute, else under the rootdir."""
    path = Path(value)
    return path if path.is_absolute() else rootdir / path


#: Options that mean something only with another: (option, the one it needs, what it needs of it).
NEEDS: tuple[tuple[str, str, str], ...] = (
    ("sequential-stop", "sequential", "true"),
    ("compare-partial", "compare", "PATH"),
)


def _check_needs(config: pytest.Config, raw: Mapping[str, Any], by: Mapping[str, OptionDef]) -> None:
    """An option given on the command line without the option it works with is a one-line usage error (an ini file
    may set such a default for the runs that do pass its partner)."""
    for noun, needed, value in NEEDS:
        given = config.getoption(by[noun].dest)
        if given is None or str(given).strip().lower() in FALSE_WORDS:
            continue
        partner = raw[needed]
        on = bool(partner) and (value == "PATH" or str(partner).strip().lower() in TRUE_WORDS)
        if not on:
            raise UsageError(f"{by[noun].flag}: only works with {by[needed].flag} {value}; add it or drop "
                             f"{by[noun].flag}")


def _sequential_stop(opt: OptionDef, value: str | None) -> str:
    """alarm or run; a one-line usage error otherwise."""
    word = str(value).strip().lower()
    if word not in ("alarm", "run"):
        raise UsageError(f"{opt.flag}: expected alarm or run, got {value!r}")
    return word


def _dollars(opt: OptionDef, value: str | None) -> float | None:
    """A positive amount of dollars (``12``, ``12.50`` or ``$12``); a one-line usage error otherwise."""
    if value is None:
        return None
    try:
        number = float(str(value).strip().lstrip("$").replace(",", ""))
    except ValueError:
        raise UsageError(f"{opt.flag}: expected dollars such as 50 or 12.50, got {value!r}") from None
    if not number > 0 or number != number or number == float("inf"):
        raise UsageError(f"{opt.flag}: expected a positive amount of dollars such as 50, got {value!r}")
    return number


def _rate(opt: OptionDef, value: str | None, example: str) -> float:
    """A number strictly between 0 and 1; a one-line usage error naming the option otherwise."""
    try:
        number = float(str(value))
    except ValueError:
        raise UsageError(f"{opt.flag}: expected a number between 0 and 1 ({example}), got {value!r}") from None
    if not 0 < number < 1:
        raise UsageError(f"{opt.flag}: expected a number between 0 and 1 ({example}), got {number}")
    return number
