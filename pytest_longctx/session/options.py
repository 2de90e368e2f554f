"""Command-line and ini options, resolved once (CLI > ini > default) into frozen Settings.

Every option is ``--longctx-<noun>`` on the command line and ``longctx_<noun>`` in the ini file.
Values are validated here, so a bad value is a one-line usage error at start-up.

A switch (``OptionDef.bare``) works like pytest's own flags: ``--longctx-plan`` alone, anywhere on the command
line, means ``--longctx-plan=true``; ``--longctx-plan=false`` and ``--longctx-plan false`` still work (the word
after a bare switch is its value only when it is one of :data:`SWITCH_WORDS`, so ``pytest --longctx-plan evals``
plans ``evals``); switches that are on by default also have a ``--no-longctx-<noun>`` form.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_longctx.backends import Price
from pytest_longctx.backends.model_spec import ModelSpec, parse_model_spec
from pytest_longctx.backends.prompt_cache import caches_prompts
from pytest_longctx.backends.registry import offering, provider_of
from pytest_longctx.errors import UsageError
from pytest_longctx.results.effective import DEFAULT_THRESHOLD
from pytest_longctx.results.thresholds import DEFAULT_ALPHA, Threshold, parse_alpha, parse_threshold
from pytest_longctx.session.option_def import OptionDef as OptionDef  # re-exported: the options table

DEFAULT_MODEL = "local/smollm2-135m"
CACHE_MODES = ("on", "off", "replay", "refresh")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "none")
#: The words a bare switch takes as its value when they follow it (``--longctx-plan false``; ``auto`` for switches
#: such as --longctx-docs-judge); any other word after it (a path) is not its value.
SWITCH_WORDS = (*TRUE_WORDS, *FALSE_WORDS, "auto")




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
    OptionDef("effective-accuracy", str(DEFAULT_THRESHOLD), "accuracy a context length must reach to count toward "
              f"the effective context length (default: {DEFAULT_THRESHOLD}, RULER's bar)"),
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


@dataclass(frozen=True)
class Settings:
    """The resolved options of one run."""

    model: ModelSpec
    seed: int
    samples: int
    report_dir: Path
    thresholds: tuple[Threshold, ...]
    compare: Path | None
    cache: str
    cache_dir: Path
    max_concurrency: int
    context_window: int
    data_dir: str | None
    judge: ModelSpec
    plan: bool
    plan_out: Path | None = None
    prefetch: str = "auto"
    batch: bool = False
    exact_tokens: bool = False
    protocol: str = "longctx"
    #: --longctx-samples all: every eligible item in every cell (``samples`` then holds the profile's default)
    samples_all: bool = False
    #: --longctx-samples (or its ini) was given as a number; otherwise experiments may use their source's count
    samples_given: bool = False
    #: --longctx-prompt-cache as given (on/off/auto) and what it resolved to for the model under test
    prompt_cache_mode: str = "auto"
    prompt_cache: bool = False
    #: --longctx-gc-freeze: freeze the heap after start-up and after collection (``session/heap.py``)
    gc_freeze: bool = True
    #: the gate's family-wise false-alarm rate, the effective length's accuracy bar, the plan's drop to detect
    alpha: float = DEFAULT_ALPHA
    effective_accuracy: float = DEFAULT_THRESHOLD
    detect: float | None = None
    rootdir: Path = field(default=Path("."))
    #: every --longctx-model in the order given (``model`` is the reference among them); one entry for one model
    models: tuple[ModelSpec, ...] = ()

    @property
    def several(self) -> bool:
        """Whether this run compares several models (``--longctx-model`` given more than once)."""
        return len(self.models) > 1
    #: --longctx-compare-partial: a partial compared run is accepted (and said in every verdict), not refused
    compare_partial: bool = False
    #: --longctx-sequential and --longctx-budget (``session/sequential_gate.py``)
    sequential: bool = False
    budget: float | None = None
    #: --longctx-sequential-stop: "alarm" (per-alarm stops) or "run" (the whole run only)
    sequential_stop: str = "alarm"
    #: --longctx-prices: overrides of genai-prices' list prices (``backends/prices.py``)
    prices: tuple[Price, ...] = ()

    def price(self, spec: ModelSpec) -> Price | None:
        """``spec``'s price: an override, else its profile's (genai-prices; free for models that run here); None:
        price unknown."""
        return next((p for p in self.prices if p.model == spec.spec), None) or spec.profile.price

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model.spec,
            "provider": self.model.provider,
            "seed": self.seed,
            "samples": self.samples,
            "cache": self.cache,
            "max_concurrency": self.max_concurrency,
            "context_window": self.context_window,
            "thresholds": [t.text for t in self.thresholds],
            "compare": str(self.compare) if self.compare else None,
            "compare_partial": self.compare_partial,
            "judge": self.judge.spec,
            "plan": self.plan,
            "prefetch": self.prefetch,
            "batch": self.batch,
            "exact_tokens": self.exact_tokens,
            "protocol": self.protocol,
            "samples_all": self.samples_all,
            "prompt_cache": self.prompt_cache,
            "prompt_cache_mode": self.prompt_cache_mode,
            "alpha": self.alpha,
            "effective_accuracy": self.effective_accuracy,
            **({"models": [m.spec for m in self.models]} if self.several else {}),
            "sequential": self.sequential,
            "budget": self.budget,
            **({"prices": [p.to_json() for p in self.prices]} if self.prices else {}),
            **({"sequential_stop": self.sequential_stop} if self.sequential else {}),
        }


GROUP = "longctx"


def add_options(parser: pytest.Parser, options: tuple[OptionDef, ...] = OPTIONS) -> None:
    """Register ``options`` (default: the core's) in the ``longctx`` option group, with their ini twins.

    A switch takes an optional value (``nargs="?"``, ``const`` its bare value); :func:`settle_switches` makes
    sure the word after a bare one is taken as its value only when it is one of :data:`SWITCH_WORDS`.
    """
    group = parser.getgroup(GROUP, "pytest-longctx: long-context LLM evaluation")
    for opt in options:
        text = opt.help.replace("%(default)s", str(opt.default))
        metavar = opt.noun.upper().replace("-", "_")
        if opt.bare is not None:
            group.addoption(opt.flag, action="store", nargs="?", const=opt.bare, dest=opt.dest, default=None,
                            metavar=metavar, help=text)
            if opt.negated is not None:
                group.addoption(opt.negated_flag, action="store_const", const=opt.negated, dest=opt.dest,
                                default=None, help=f"the same as {opt.flag}={opt.negated}")
        else:
            group.addoption(opt.flag, action="append" if opt.is_list else "store", dest=opt.dest, default=None,
                            metavar=metavar, help=text)
        ini_type: Literal["linelist", "string"] = "linelist" if opt.is_list else "string"
        parser.addini(opt.dest, help=text, type=ini_type, default=[] if opt.is_list else None)


def switches(parser: pytest.Parser) -> dict[str, tuple[str, str]]:
    """The switches registered in the ``longctx`` group (the core's and every experiment's): flag -> (dest,
    bare value)."""
    found = {}
    for option in parser.getgroup(GROUP).options:
        attrs = option.attrs()
        if attrs.get("nargs") == "?" and isinstance(attrs.get("const"), str):
            found.update({name: (str(attrs["dest"]), str(attrs["const"])) for name in option.names()})
    return found


def normalize_switches(args: Sequence[str], bare: Mapping[str, str], here: Path | None = None) -> list[str]:
    """``args`` with every bare switch given its value explicitly: ``--longctx-plan evals`` becomes
    ``--longctx-plan=true evals``, ``--longctx-plan false`` becomes ``--longctx-plan=false`` (``bare``: flag ->
    the value of the bare flag). Nothing after ``--`` is touched.

    With ``here`` (the folder pytest resolves paths from), a word after a bare switch that is neither one of
    :data:`SWITCH_WORDS`, nor an option, nor an existing file or folder (``--longctx-plan maybe``) is a
    :class:`UsageError` naming the switch, instead of a test path pytest reports missing after the run.
    """
    out: list[str] = []
    pyargs = "--pyargs" in args  # then a word may name a package, not a path
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        if arg in bare:
            follows = args[i + 1] if i + 1 < len(args) else None
            taken = follows is not None and follows.strip().lower() in SWITCH_WORDS
            if follows is not None and not taken and here is not None and not pyargs:
                _check_path_after(arg, follows, here)
            out.append(f"{arg}={follows if taken else bare[arg]}")
            i += 2 if taken else 1
            continue
        out.append(arg)
        i += 1
    return out


def _check_path_after(flag: str, word: str, here: Path) -> None:
    """``word`` follows the bare switch ``flag`` and is not its value: it must be an option or a test path."""
    if word.startswith("-") or (here / word.split("::")[0]).exists():
        return
    raise UsageError(f"{flag}: {word!r} is neither a value of it (such as true or false) nor a file or folder; "
                     f"write {flag}=VALUE, or pass a path that exists")


def settle_switches(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``pytest_load_initial_conftests``: rewrite ``args`` in place with :func:`normalize_switches`, before pytest
    parses them for good; the early parse (already done, which took a path after a bare switch for its value) is
    redone for the paths and the switches, so the initial conftests are looked up where the user pointed."""
    found = switches(parser)
    try:
        settled = normalize_switches(args, {flag: value for flag, (_, value) in found.items()},
                                     Path(early_config.invocation_params.dir))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settled == list(args):
        return
    args[:] = settled
    fresh = parser.parse_known_args(args, namespace=copy.copy(early_config.option))
    known = early_config.known_args_namespace
    for dest in {"file_or_dir", *(dest for dest, _ in found.values())}:
        setattr(known, dest, getattr(fresh, dest))


def raw_value(config: pytest.Config, opt: OptionDef) -> str | list[str] | None:
    """The option's value as given: command line, else ini file, else its default (not validated)."""
    return _raw(config, opt)


def _raw(config: pytest.Config, opt: OptionDef) -> str | list[str] | None:
    cli = config.getoption(opt.dest)
    if cli is not None:
        return list(cli) if opt.is_list else str(cli)
    ini = config.getini(opt.dest)
    if opt.is_list:
        return list(ini or [])
    return str(ini) if ini not in (None, "") else opt.default


def _int(opt: OptionDef, value: str | None, low: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise UsageError(f"{opt.flag}: expected a whole number, got {value!r}") from None
    if number < low:
        raise UsageError(f"{opt.flag}: must be >= {low}, got {number}")
    return number


def _int_list(opt: OptionDef, value: str | None, low: int) -> tuple[int, ...]:
    """A comma-separated list of whole numbers >= low, sorted and without duplicates (empty: none given)."""
    if value is None or not str(value).strip():
        return ()
    parts = [p.strip().replace("_", "") for p in str(value).split(",") if p.strip()]
    return tuple(sorted({_int(opt, p, low) for p in parts}))


def _bool(opt: OptionDef, value: str | None) -> bool:
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in (*FALSE_WORDS, ""):
        return False
    raise UsageError(f"{opt.flag}: expected true or false, got {value!r}")


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
    raw: dict[str, Any] = {opt.noun: _raw(config, opt) for opt in OPTIONS}
    by = {opt.noun: opt for opt in OPTIONS}
    from pytest_longctx.session.model_axis import resolve_models

    models, model = resolve_models(config, by["model"], by["reference"])
    judge = parse_model_spec(str(raw["judge"]), flag=by["judge"].flag) if raw["judge"] else model
    samples_all = str(raw["samples"]).strip().lower() == "all"
    samples = (_int(by["samples"], raw["samples"], 1) if raw["samples"] is not None and not samples_all
               else model.profile.default_samples)
    from pytest_longctx.session.money import check_money

    window_given = (_int(by["context-window"], raw["context-window"], 256) if raw["context-window"] is not None
                    else None)
    budget = _dollars(by["budget"], raw["budget"])
    prices, window = check_money(raw, by, models, model, judge, window_given, budget)
    cache = str(raw["cache"])
    if cache not in CACHE_MODES:
        raise UsageError(f"{by['cache'].flag}: expected one of {', '.join(CACHE_MODES)}, got {cache!r}")
    from pytest_longctx.results.decision import unique

    # the same check twice (or spelled two ways) is one alarm: Holm, the sequential gate and the plan count it once
    thresholds = unique(parse_threshold(t, flag=by["threshold"].flag) for t in (raw["threshold"] or []))
    _check_needs(config, raw, by)
    rootdir = Path(str(config.rootpath))
    compare = Path(str(raw["compare"])) if raw["compare"] else None
    if compare is not None and not compare.is_file():
        what = "is a folder" if compare.is_dir() else "not found"
        raise UsageError(f"{by['compare'].flag}: {compare} {what}; pass an earlier run's longctx.json")
    protocol = str(raw["protocol"])
    if protocol not in ("source", "longctx"):
        raise UsageError(f"{by['protocol'].flag}: expected source or longctx, got {protocol!r}")
    prefetch = str(raw["prefetch"]).strip().lower()
    if prefetch not in ("auto", "on", "off"):
        raise UsageError(f"{by['prefetch'].flag}: expected auto, on or off, got {prefetch!r}")
    batch = _bool(by["batch"], raw["batch"])
    exact_tokens = _bool(by["exact-tokens"], raw["exact-tokens"])
    prompt_cache_mode = str(raw["prompt-cache"]).strip().lower()
    if prompt_cache_mode not in ("on", "off", "auto"):
        raise UsageError(f"{by['prompt-cache'].flag}: expected on, off or auto, got {raw['prompt-cache']!r}")
    for each in models:
        check_provider_modes(each, prefetch=prefetch, batch=batch, exact_tokens=exact_tokens, cache=cache)
    from pytest_longctx.session.model_axis import check_several_modes

    check_several_modes(models, prefetch=prefetch, batch=batch)
    if batch and cache == "off":
        raise UsageError(f"{by['batch'].flag}: batch results are delivered through the cache; drop --longctx-cache off")
    report_dir = Path(str(raw["report-dir"]))
    cache_dir = Path(str(raw["cache-dir"] or os.environ.get("LONGCTX_CACHE_DIR", ".longctx-cache")))
    return Settings(
        model=model,
        seed=_int(by["seed"], raw["seed"], 0),
        samples=samples,
        report_dir=report_dir if report_dir.is_absolute() else rootdir / report_dir,
        thresholds=thresholds,
        compare=compare,
        cache=cache,
        cache_dir=cache_dir if cache_dir.is_absolute() else rootdir / cache_dir,
        max_concurrency=_int(by["max-concurrency"], raw["max-concurrency"], 1),
        context_window=window,
        data_dir=str(raw["data-dir"]) if raw["data-dir"] else None,
        judge=judge,
        plan=_bool(by["plan"], raw["plan"]),
        plan_out=Path(str(raw["plan-out"])) if raw["plan-out"] else None,
        prefetch=prefetch,
        batch=batch,
        exact_tokens=exact_tokens,
        protocol=protocol,
        samples_all=samples_all,
        samples_given=raw["samples"] is not None and not samples_all,
        prompt_cache_mode=prompt_cache_mode,
        prompt_cache=prompt_cache_mode == "on" or (prompt_cache_mode == "auto" and caches_prompts(model.provider)),
        gc_freeze=_bool(by["gc-freeze"], raw["gc-freeze"]),
        alpha=parse_alpha(str(raw["alpha"]), flag=by["alpha"].flag),
        effective_accuracy=_rate(by["effective-accuracy"], raw["effective-accuracy"], "e.g. 0.85"),
        detect=_rate(by["detect"], raw["detect"], "a drop such as 0.03") if raw["detect"] is not None else None,
        rootdir=rootdir,
        models=models,
        compare_partial=_bool(by["compare-partial"], raw["compare-partial"]),
        sequential=_bool(by["sequential"], raw["sequential"]),
        budget=budget,
        sequential_stop=_sequential_stop(by["sequential-stop"], raw["sequential-stop"]),
        prices=tuple(prices.values()),
    )


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
