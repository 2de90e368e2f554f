"""Threshold grammar, selector matching, per-cell verdicts and the gate summary."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.results.gating import (
    GATE_ERROR_EXIT_CODE,
    GATE_EXIT_CODE,
    Threshold,
    cell_verdict,
    check_cell,
    evaluate,
    parse_threshold,
)


def _cell(accuracy: float, n: int = 20, experiment: str = "lrt", compare: dict[str, Any] | None = None,
          **params: Any) -> dict[str, Any]:
    cell: dict[str, Any] = {"key": experiment + repr(sorted(params.items())), "experiment": experiment,
                            "params": params, "n": n, "accuracy": accuracy}
    if compare is not None:
        cell["compare"] = compare
    return cell


@pytest.mark.parametrize(("text", "selector", "kind", "value", "alpha", "min_n"), [
    ("*:0.8", (), "min", 0.8, None, 1),
    ("  *:0.8  ", (), "min", 0.8, None, 1),
    ("*:min=0.75", (), "min", 0.75, None, 1),
    ("*:1", (), "min", 1.0, None, 1),
    ("*:0", (), "min", 0.0, None, 1),
    ("experiment=lrt:0.95", (("experiment", "lrt"),), "min", 0.95, None, 1),
    ("experiment=lrt, shuffle=none:0.95", (("experiment", "lrt"), ("shuffle", "none")), "min", 0.95, None, 1),
    ("shuffle=block-*:0.5@n=30", (("shuffle", "block-*"),), "min", 0.5, None, 30),
    ("*:max-drop=0.05", (), "max-drop", 0.05, None, 1),
    ("*:max-drop=0.05/sig", (), "max-drop", 0.05, 0.05, 1),
    ("experiment=qa:max-drop=0.1/sig=0.01@n=10", (("experiment", "qa"),), "max-drop", 0.1, 0.01, 10),
    ("*:0.5@n=0", (), "min", 0.5, None, 1),  # at least one scored trial is always required
])
def test_parse_valid(text: str, selector: tuple[tuple[str, str], ...], kind: str, value: float,
                     alpha: float | None, min_n: int) -> None:
    t = parse_threshold(text)
    got = (t.text, t.selector, t.kind, t.value, t.alpha, t.min_n)
    assert got == (text.strip(), selector, kind, value, alpha, min_n)


@pytest.mark.parametrize(("text", "why"), [
    ("0.8", "missing SELECTOR:SPEC"),
    ("*:", "missing SELECTOR:SPEC"),
    (":0.8", "missing SELECTOR:SPEC"),
    ("", "missing SELECTOR:SPEC"),
    ("lrt:0.8", "selector part 'lrt' is not key=value"),
    ("experiment=:0.8", "is not key=value"),
    ("experiment=lrt,,shuffle=none:0.8", "is not key=value"),
    ("*:high", "'high' is not a number"),
    ("*:min=", "'' is not a number"),
    ("*:1.5", "accuracy must be between 0 and 1"),
    ("*:-0.1", "accuracy must be between 0 and 1"),
    ("*:nan", "accuracy must be between 0 and 1"),
    ("*:max-drop=x", "'x' is not a number"),
    ("*:max-drop=0.05/often", "unknown suffix 'often'"),
    ("*:max-drop=0.05/sig=1.5", "significance level must be between 0 and 1"),
    ("*:max-drop=0.05/sig=0", "significance level must be between 0 and 1"),
    ("*:max-drop=0.05/sig=low", "'low' is not a number"),
    ("*:0.8@30", "expected @n=N"),
    ("*:0.8@n=many", "expected @n=N with a whole number"),
])
def test_parse_invalid_is_one_line_usage_error(text: str, why: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        parse_threshold(text, flag="--longctx-threshold")
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith("--longctx-threshold: ")
    assert why in message
    assert repr(text.strip()) in message  # quotes the expression


def test_matching_with_globs() -> None:
    everything = parse_threshold("*:0.5")
    assert everything.matches("anything", {}) and everything.matches("lrt", {"shuffle": "none"})

    t = parse_threshold("experiment=lrt,shuffle=block-*:0.9")
    assert t.matches("lrt", {"shuffle": "block-4", "lines": 100})
    assert not t.matches("lrt", {"shuffle": "none"})
    assert not t.matches("qa", {"shuffle": "block-4"})
    assert not t.matches("lrt", {"lines": 100})  # a selector key the cell lacks never matches

    assert parse_threshold("experiment=qa*:0.5").matches("qa-baseline", {})
    assert not parse_threshold("experiment=qa:0.5").matches("qa-baseline", {})
    assert parse_threshold("depth=0.?:0.5").matches("lrt", {"depth": 0.5})  # numbers match their JSON text
    assert parse_threshold("lines=1?0:0.5").matches("lrt", {"lines": 100})
    assert parse_threshold("cot=true:0.5").matches("qa", {"cot": True})
    assert not parse_threshold("shuffle=None:0.5").matches("lrt", {"shuffle": "none"})  # case-sensitive


def test_min_verdicts() -> None:
    t = parse_threshold("*:0.8")
    assert check_cell(t, _cell(0.8), None)["verdict"] == "pass"  # reaching it is enough
    assert check_cell(t, _cell(0.95), None)["verdict"] == "pass"
    failed = check_cell(t, _cell(0.75), None)
    assert failed == {"threshold": "*:0.8", "kind": "min", "value": 0.8, "verdict": "fail", "detail": "0.750 < 0.8"}


def test_too_few() -> None:
    t = parse_threshold("*:0.8@n=30")
    assert check_cell(t, _cell(0.1, n=29), None)["verdict"] == "too-few"
    assert check_cell(t, _cell(1.0, n=29), None)["detail"] == "n=29 < 30"
    assert check_cell(t, _cell(0.1, n=30), None)["verdict"] == "fail"
    assert check_cell(parse_threshold("*:0.8"), _cell(0.0, n=0), None)["verdict"] == "too-few"  # only errors


def test_max_drop_without_sig() -> None:
    t = parse_threshold("*:max-drop=0.05")
    assert check_cell(t, _cell(0.9), None)["verdict"] == "no-baseline"
    assert check_cell(t, _cell(0.86), _cell(0.9))["verdict"] == "pass"
    assert check_cell(t, _cell(0.85), _cell(0.9))["verdict"] == "pass"  # exactly the allowed drop
    assert check_cell(t, _cell(0.84), _cell(0.9))["verdict"] == "fail"
    assert check_cell(t, _cell(1.0), _cell(0.5))["verdict"] == "pass"  # an improvement
    assert check_cell(parse_threshold("*:max-drop=0.05@n=40"), _cell(0.0), _cell(1.0))["verdict"] == "too-few"


def test_max_drop_with_sig() -> None:
    t = parse_threshold("*:max-drop=0.05/sig")
    base = _cell(0.9)
    significant = {"p_value": 0.01}
    not_significant = {"p_value": 0.2}
    assert check_cell(t, _cell(0.5, compare=significant), base)["verdict"] == "fail"
    drop = check_cell(t, _cell(0.5, compare=not_significant), base)
    assert drop["verdict"] == "pass"  # a large but not significant drop passes
    assert "McNemar p=0.2" in drop["detail"]
    assert check_cell(t, _cell(0.88, compare=significant), base)["verdict"] == "pass"  # within the allowed drop
    unpaired = check_cell(t, _cell(0.5, compare={"p_value": None}), base)
    assert unpaired["verdict"] == "error"  # a drop over the limit whose significance cannot be tested: fail closed
    assert "no paired trials" in unpaired["detail"]
    assert check_cell(t, _cell(0.5), base)["verdict"] == "error"
    assert check_cell(t, _cell(0.88), base)["verdict"] == "pass"  # within the limit: no test needed
    strict = parse_threshold("*:max-drop=0.05/sig=0.001")
    assert check_cell(strict, _cell(0.5, compare=significant), base)["verdict"] == "pass"


def test_evaluate_gate() -> None:
    cells = [_cell(0.9, shuffle="none"), _cell(0.4, shuffle="block-4"), _cell(0.2, experiment="qa", n=3)]
    thresholds = (parse_threshold("experiment=lrt:0.5"), parse_threshold("*:0.1@n=5"))
    gate = evaluate(cells, thresholds, {})
    assert gate == {"status": "fail", "counts": {"pass": 3, "fail": 1, "too-few": 1, "no-baseline": 0, "error": 0},
                    "errors": [], "thresholds": ["experiment=lrt:0.5", "*:0.1@n=5"], "exit_code": GATE_EXIT_CODE}
    assert [c["verdict"] for c in cells[0]["checks"]] == ["pass", "pass"]
    assert [c["verdict"] for c in cells[1]["checks"]] == ["fail", "pass"]
    assert [c["verdict"] for c in cells[2]["checks"]] == ["too-few"]
    assert [cell_verdict(c) for c in cells] == ["pass", "fail", "too-few"]

    passed = evaluate([_cell(0.9)], (parse_threshold("*:0.5"),), {})
    assert (passed["status"], passed["exit_code"]) == ("pass", 0)
    too_few_only = evaluate([_cell(0.9, n=2)], (parse_threshold("*:0.5@n=3"),), {})
    # a threshold that checked no cell at all is an error: too-few alone never passes the gate
    assert (too_few_only["status"], too_few_only["exit_code"]) == ("error", GATE_ERROR_EXIT_CODE)
    assert too_few_only["errors"] == ["threshold '*:0.5@n=3' checked no cell: each of its 1 cells has too few "
                                      "scored trials or no baseline (@n=3)"]
    some_too_few = evaluate([_cell(0.9, n=2), _cell(0.9, n=5, shuffle="none")], (parse_threshold("*:0.5@n=3"),), {})
    assert (some_too_few["status"], some_too_few["counts"]["too-few"]) == ("pass", 1)  # too-few itself never fails
    none = evaluate([_cell(0.1)], (), {})
    assert (none["status"], none["exit_code"]) == ("none", 0)
    assert cell_verdict({"checks": []}) == "" == cell_verdict({})


def test_evaluate_uses_baselines_by_key() -> None:
    cell = _cell(0.5)
    gate = evaluate([cell], (parse_threshold("*:max-drop=0.1"),), {cell["key"]: _cell(0.9)})
    assert gate["counts"]["fail"] == 1
    gate = evaluate([_cell(0.5)], (parse_threshold("*:max-drop=0.1"),), {"other": _cell(0.9)})
    assert gate["counts"]["no-baseline"] == 1 and gate["status"] == "error"  # compared with nothing
    assert gate["errors"] == ["threshold '*:max-drop=0.1': the compared run shares none of its 1 cells"]
    two = [_cell(0.5), _cell(0.5, shuffle="new")]
    gate = evaluate(two, (parse_threshold("*:max-drop=0.1"),), {two[0]["key"]: _cell(0.55)})
    assert (gate["status"], gate["counts"]["pass"], gate["counts"]["no-baseline"]) == ("pass", 1, 1)  # a new cell


def test_gate_exit_code_is_public_and_distinct() -> None:
    import pytest_longctx

    assert pytest_longctx.GATE_EXIT_CODE == GATE_EXIT_CODE == 10
    assert pytest_longctx.GATE_ERROR_EXIT_CODE == GATE_ERROR_EXIT_CODE == 11
    assert {GATE_EXIT_CODE, GATE_ERROR_EXIT_CODE}.isdisjoint({int(code) for code in pytest.ExitCode})


def test_threshold_is_frozen() -> None:
    t = parse_threshold("*:0.8")
    assert isinstance(t, Threshold)
    with pytest.raises(AttributeError):
        t.value = 0.1  # type: ignore[misc]
