"""``longctx-qa stats|validate`` on the shared issue, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_longctx.experiments.qa.__main__ import main
from pytest_longctx.experiments.qa.generate import open_issue
from tests.corpus_data import QUESTIONS

DATE = "2024-02-12"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory, fr_data_dir: str) -> Path:
    """The shared issue's section cache, built once per session (the same folder as test_qa_generate's)."""
    cache = tmp_path_factory.getbasetemp() / "qa-fr-cache"
    if not cache.is_dir():
        building = tmp_path_factory.mktemp("qa-fr-cache-build")
        open_issue(DATE, fr_data_dir, building)
        building.rename(cache)
    return cache / "corpora"


@pytest.fixture
def cache_dir(tmp_path: Path, corpora: Path) -> Path:
    target = tmp_path / "cache"
    shutil.copytree(corpora, target / "corpora")
    return target


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


# -- stats -----------------------------------------------------------------------------------------


def test_stats_prints_the_shared_issue_figures(capsys, cache_dir, fr_xml, fr_data_dir) -> None:
    code, out, err = run(capsys, "stats", "--date", DATE, "--data-dir", fr_data_dir, "--cache-dir", str(cache_dir))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"FR {DATE}: {fr_xml}"
    assert lines[1:] == [
        "raw sections:   100",
        "kept sections:  79 (200 < tokens <= 5,000)",
        "total tokens:   115,737",
        "section tokens: min 210, median 969, max 4,644",
        "tokenizer:      tiktoken/cl100k_base",
    ]


def test_stats_list_names_every_kept_section(capsys, cache_dir, fr_data_dir) -> None:
    code, out, _ = run(capsys, "stats", "--date", DATE, "--data-dir", fr_data_dir, "--cache-dir", str(cache_dir),
                       "--list")
    listed = [line.split() for line in out.splitlines() if line.startswith("  ")]
    assert code == 0 and len(listed) == 79
    assert listed[0][:2] == ["2024-02930", "3,666"] and "DEPARTMENT OF TRANSPORTATION" in " ".join(listed[0])


# -- validate --------------------------------------------------------------------------------------


def test_validate_passes_the_shipped_set(capsys, cache_dir, fr_data_dir) -> None:
    code, out, err = run(capsys, "validate", str(QUESTIONS), "--data-dir", fr_data_dir, "--cache-dir", str(cache_dir))
    assert (code, err) == (0, "")  # the date comes from the file name
    assert out.splitlines() == [
        "sections: 79, of which 79 have five questions with one numerical",
        f"{QUESTIONS}: 395 questions, 0 problem(s); answer is the longest option in 16% of questions",
    ]


def test_validate_lists_problems_and_exits_1(capsys, cache_dir, tmp_path, fr_data_dir) -> None:
    lines = QUESTIONS.read_text(encoding="utf-8").splitlines()[:5]
    broken = [json.loads(line) for line in lines]
    broken[0]["evidence"] = "A sentence the FAA never wrote."
    broken[1]["distractors"][0] = broken[1]["answer"]
    broken[2]["question"] = "What does this document require"
    broken[4]["answer"] = "Hand-tight"
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(b, ensure_ascii=False) + "\n" for b in broken), encoding="utf-8")
    code, out, err = run(capsys, "validate", str(path), "--date", DATE, "--data-dir", fr_data_dir,
                         "--cache-dir", str(cache_dir))
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        "2024-02930/q1: evidence not found in section 2024-02930",
        "2024-02930/q2: options are not distinct",
        "2024-02930/q3: question says 'this document'; name the agency or subject",
        "2024-02930/q3: question does not end with '?'",
        "2024-02930/q5: numerical question whose answer states no number",
        "sections: 1, of which 1 have five questions with one numerical",
        f"{path}: 5 questions, 5 problem(s); answer is the longest option in 40% of questions",
    ]


# -- bad input: one line on stderr, exit 2 ---------------------------------------------------------


def test_unknown_date_offline_names_the_file_and_the_option(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LONGCTX_FR_URL", "http://127.0.0.1:9/FR-{date}.xml")
    code, _, err = run(capsys, "stats", "--date", "1999-01-04", "--cache-dir", str(tmp_path))
    assert code == 2
    line = one_line_error(err)
    assert "FR-1999-01-04.xml" in line and str(tmp_path / "corpora") in line and "--data-dir" in line
    assert "--longctx-data-dir" not in line


def test_examples_issue_missing_offline_is_named(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LONGCTX_FR_URL", "http://127.0.0.1:9/FR-{date}.xml")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    data = tmp_path / "data"
    data.mkdir()
    (data / "FR-2024-03-04.xml").write_text("<FEDREG><P>DEPARTMENT OF TRANSPORTATION</P></FEDREG>")  # not 02-12
    code, _, err = run(capsys, "generate", "--date", "2024-03-04", "--model", "anthropic/claude-test",
                       "--data-dir", str(data), "--cache-dir", str(tmp_path / "cache"))
    assert code == 2
    assert one_line_error(err).startswith("error: few-shot examples: Federal Register 2024-02-12 not found")


@pytest.mark.parametrize(("model", "expected"), [
    ("claude-sonnet-4-5", "--model: expected provider/name"),
    ("fake/perfect", "--model: generation runs on Claude through the Anthropic API"),
    ("anthropic/gpt-4o", "--model: 'anthropic/gpt-4o' is not a Claude model id"),
    ("acme/model", "--model: unknown provider 'acme'"),
])
def test_bad_model_spec(capsys, tmp_path, monkeypatch, model, expected) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    code, _, err = run(capsys, "generate", "--date", DATE, "--model", model, "--data-dir", str(tmp_path),
                       "--cache-dir", str(tmp_path))
    assert code == 2 and one_line_error(err).startswith(f"error: {expected}")


def test_missing_api_key(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, _, err = run(capsys, "generate", "--date", DATE, "--model", "anthropic/claude-test",
                       "--cache-dir", str(tmp_path))
    assert code == 2 and "ANTHROPIC_API_KEY is not set" in one_line_error(err)


def test_unknown_section_and_corrupt_output(capsys, cache_dir, tmp_path, monkeypatch, fr_data_dir) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    base = ["generate", "--date", DATE, "--model", "anthropic/claude-test", "--data-dir", fr_data_dir,
            "--cache-dir", str(cache_dir)]
    code, _, err = run(capsys, *base, "--section", "2024-99999")
    assert code == 2 and one_line_error(err).startswith("error: --section: 2024-99999 is not a kept section of FR")
    assert "stats --date 2024-02-12 --list" in err
    out = tmp_path / "q.jsonl"
    out.write_text('{"id": "a/q1", "section_id": "a"}\n{not json\n')
    code, _, err = run(capsys, *base, "--out", str(out), "--section", "2024-02930")
    assert code == 2 and one_line_error(err).startswith(f"error: {out}:2: invalid JSON")


def test_validate_missing_file_and_date(capsys, tmp_path) -> None:
    code, _, err = run(capsys, "validate", str(tmp_path / "FR-2024-02-12.missing.jsonl"))
    assert code == 2 and "no such question file" in one_line_error(err)
    undated = tmp_path / "mine.jsonl"
    undated.write_text("")
    code, _, err = run(capsys, "validate", str(undated))
    assert code == 2 and one_line_error(err).startswith("error: --date: not given and mine.jsonl does not name one")


@pytest.mark.parametrize("args", [
    ["stats", "--date", "2024-2-12"],
    ["stats", "--date", "2024-02-30"],
    ["generate", "--date", DATE, "--model", "anthropic/claude-test", "--sections", "0"],
    ["generate", "--date", DATE],
    ["frobnicate"],
])
def test_usage_errors_are_one_line(capsys, args) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and one_line_error(captured.err).startswith("error: longctx-qa")


def test_the_module_runs_as_a_command_without_tracebacks(tmp_path) -> None:
    missing = tmp_path / "FR-2024-02-12.nothing.jsonl"
    result = subprocess.run([sys.executable, "-m", "pytest_longctx.experiments.qa", "validate", str(missing)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"error: {missing}: no such question file; pass a JSONL question set such as "
                             "fixtures/questions/FR-2024-02-12.jsonl\n")


def test_help_names_every_option(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--help"])
    help_text = capsys.readouterr().out
    assert exc.value.code == 0
    flags = ("--date", "--model", "--data-dir", "--out", "--sections", "--section", "--concurrency", "--no-cache")
    assert all(flag in help_text for flag in flags)
