"""Which option combinations make sense: contradictory modes and absurd values are usage errors at start-up.

Checked once on the controller and on every worker, right after the options are resolved, so a run
that could send requests it was told not to send (replay, plan) or could not finish (a sample count
that exhausts memory) stops with one line before anything is collected or sent.
"""

from __future__ import annotations

import os

from pytest_longctx.backends.prompt_cache import caches_prompts
from pytest_longctx.backends.registry import offering
from pytest_longctx.errors import UsageError
from pytest_longctx.run_settings import Settings
from pytest_longctx.util.fsutil import folder_problem

#: Trials per condition cell; more would only exhaust memory at collection (every trial is a test item).
MAX_SAMPLES = 10_000


def check_settings(s: Settings) -> None:
    """Raise a one-line :class:`UsageError` for a contradictory or absurd combination of options."""
    if s.samples > MAX_SAMPLES:
        raise UsageError(f"--longctx-samples: at most {MAX_SAMPLES:,} trials per cell, got {s.samples:,}")
    if s.batch and s.plan:
        raise UsageError("--longctx-batch: cannot be combined with --longctx-plan (a dry run submits nothing); "
                         "drop one of them")
    if s.cache == "replay" and s.batch:  # (--longctx-prefetch on with replay: options.check_provider_modes)
        raise UsageError("--longctx-batch: cannot be combined with --longctx-cache replay (replay never sends "
                         "or submits a request); drop one of them")
    for model in dict.fromkeys((s.model, *s.models)):  # several --longctx-model: each of them
        if s.prompt_cache_mode == "on" and not caches_prompts(model.provider):
            raise UsageError(f"--longctx-prompt-cache on: only {offering('prompt_cache')} models have prompt caching, "
                             f"not {model.spec}; use auto or off")
    if s.detect is not None and not s.plan and not s.sequential:
        raise UsageError(f"--longctx-detect: {s.detect:g} is a drop the plan sizes the run for, or the sequential "
                         "gate clears against; add --longctx-plan true or --longctx-sequential, or drop "
                         "--longctx-detect")
    if s.plan_out is not None:
        if not s.plan:
            raise UsageError(f"--longctx-plan-out: {s.plan_out} is only written by a dry run; add --longctx-plan "
                             "true or drop --longctx-plan-out")
        if s.plan_out.is_dir():
            raise UsageError(f"--longctx-plan-out: {s.plan_out} is a folder; pass a file path such as plan.jsonl")
        problem = folder_problem(s.plan_out.parent)
        if problem is not None:
            raise UsageError(f"--longctx-plan-out: {s.plan_out.parent} {problem}; pass a writable file path")
        if s.plan_out.exists() and not os.access(s.plan_out, os.W_OK):
            raise UsageError(f"--longctx-plan-out: {s.plan_out} is not writable; pass a writable file path")
