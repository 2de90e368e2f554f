"""Options: --help, one-line usage errors, CLI over ini, ini list thresholds."""

from __future__ import annotations

from typing import Any

import pytest

ONE_TRIAL = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("opt")
@pytest.mark.parametrize("kind", ["right", "wrong"])
async def test_one(longctx, kind):
    answer = await longctx.ask(Request.user(f"{kind}?", max_tokens=4), oracle=Oracle("yes", ("no",)))
    assert answer == ("yes" if kind == "right" else "nope")
'''


def test_help_shows_the_longctx_group(longctx_runner: Any) -> None:
    result = longctx_runner.pytester.runpytest_inprocess("--help")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "pytest-longctx: long-context LLM evaluation:",
        "*--longctx-model=MODEL*",
    ])
    text = result.stdout.str()
    for flag in ("--longctx-seed", "--longctx-samples", "--longctx-threshold", "--longctx-report-dir",
                 "--longctx-cache", "--longctx-compare", "--longctx-plan", "--longctx-max-concurrency"):
        assert flag in text
    for ini in ("longctx_model", "longctx_threshold", "longctx_seed"):
        assert ini in text
    assert "(default: on)" in text  # help states the default


@pytest.mark.parametrize(("args", "message", "subprocess"), [
    (["--longctx-model", "fake/nope"], "--longctx-model: unknown fake model 'nope'", True),
    (["--longctx-model", "nowhere/x"], "--longctx-model: unknown provider 'nowhere'", False),
    (["--longctx-threshold", "kind=wrong"], "--longctx-threshold: missing SELECTOR:CHECK", True),
    (["--longctx-threshold", "*:1.5"], "--longctx-threshold: accuracy and drops are between 0 and 1", False),
    (["--longctx-threshold", "*:max-drop=0.1/often"], "unknown suffix 'often'", False),
    (["--longctx-lrt-lines", "500,many"], "--longctx-lrt-lines: expected a whole number, got 'many'", False),
    (["--longctx-lrt-lines", "1"], "--longctx-lrt-lines: must be >= 2, got 1", False),
], ids=["fake-name", "provider", "no-spec", "range", "suffix", "lrt-lines", "lrt-lines-low"])
def test_bad_value_is_a_one_line_usage_error(longctx_runner: Any, args: list[str], message: str,
                                             subprocess: bool) -> None:
    pytester = longctx_runner.pytester
    pytester.makepyfile(test_one=ONE_TRIAL)
    args = args if "--longctx-model" in args else ["--longctx-model", "fake/perfect", *args]
    result = pytester.runpytest_subprocess(*args) if subprocess else pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1, result.stderr.str()
    assert lines[0].startswith("ERROR: ") and message in lines[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_bad_ini_threshold_is_a_usage_error(longctx_runner: Any) -> None:
    longctx_runner.project('longctx_threshold = ["*:0.8", "shuffle:0.9"]')
    longctx_runner.pytester.makepyfile(test_one=ONE_TRIAL)
    run = longctx_runner.run()
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "selector part 'shuffle' is not key=value" in run.result.stderr.str()


def test_cli_overrides_ini(longctx_runner: Any) -> None:
    longctx_runner.project('longctx_model = "fake/wrong"\nlongctx_seed = "5"\nlongctx_samples = "2"\n'
                           'longctx_threshold = ["*:0.9"]')
    longctx_runner.pytester.makepyfile(test_one=ONE_TRIAL)

    from_ini = longctx_runner.run(model=None)
    settings = from_ini.record["settings"]
    assert (settings["model"], settings["seed"], settings["samples"]) == ("fake/wrong", 5, 2)
    assert settings["thresholds"] == ["*:0.9"]
    assert from_ini.ret == 10

    from_cli = longctx_runner.run("--longctx-seed", "9", "--longctx-threshold", "kind=right:1.0", model="fake/perfect")
    settings = from_cli.record["settings"]
    assert (settings["model"], settings["seed"], settings["samples"]) == ("fake/perfect", 9, 2)
    assert settings["thresholds"] == ["kind=right:1.0"]  # a CLI list replaces the ini list
    assert from_cli.ret == pytest.ExitCode.OK
    assert {t["seed"] for t in from_cli.record["trials"]}.isdisjoint(t["seed"] for t in from_ini.record["trials"])


@pytest.mark.parametrize("form", ["toml-list", "ini-lines"])
def test_ini_list_thresholds(longctx_runner: Any, form: str) -> None:
    pytester = longctx_runner.pytester
    if form == "toml-list":
        longctx_runner.project('longctx_threshold = ["kind=right:1.0/point", "kind=wrong:0.5/point@n=1"]')
    else:
        (pytester.path / "pyproject.toml").unlink()
        pytester.makeini("""
            [pytest]
            asyncio_mode = strict
            asyncio_default_fixture_loop_scope = session
            asyncio_default_test_loop_scope = session
            addopts = -p no:cacheprovider -p no:hypothesispytest -p no:benchmark -p no:anyio
            longctx_threshold =
                kind=right:1.0/point
                kind=wrong:0.5/point@n=1
        """)
    pytester.makepyfile(test_one=ONE_TRIAL)
    run = longctx_runner.run("--longctx-samples", "2")

    assert run.record["settings"]["thresholds"] == ["kind=right:1.0/point", "kind=wrong:0.5/point@n=1"]
    assert run.record["gate"]["counts"] == {"pass": 1, "fail": 1, "too-few": 0, "error": 0}
    assert [(c["threshold"], c["verdict"]) for c in run.record["gate"]["checks"]] == [
        ("kind=right:1.0/point", "pass"), ("kind=wrong:0.5/point@n=1", "fail")]
    assert run.ret == 10


def test_lrt_lines_from_ini_and_cli(longctx_runner: Any) -> None:
    """--longctx-lrt-lines (ini longctx_lrt_lines) reaches the settings sorted; the command line wins."""
    longctx_runner.project('longctx_lrt_lines = "6500, 500,1000"')
    longctx_runner.pytester.makepyfile(test_one=ONE_TRIAL)
    assert longctx_runner.run().record["settings"]["lrt_lines"] == [500, 1000, 6500]
    assert longctx_runner.run("--longctx-lrt-lines", "2000").record["settings"]["lrt_lines"] == [2000]
