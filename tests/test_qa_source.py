"""The qa experiment's source protocol, honest sizes, distractor issues and the study's sample design.

Word for word: every source template is checked against the study's notebook (``../shared/seeds``).
End to end: ``evals/qa`` runs with ``--longctx-protocol source`` against ``anthropic/claude-test``
answered by the local Messages-API server, and the requests it received are inspected.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.context.haystack import Unit
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.experiments.qa import source
from pytest_longctx.experiments.qa import source_prompts as P
from pytest_longctx.experiments.qa.experiment import QaData
from pytest_longctx.experiments.qa.federal_register import load_issue
from pytest_longctx.experiments.qa.questions import load_questions
from pytest_longctx.experiments.qa.sizing import choose_sizes, fill_close, tolerance
from pytest_longctx.server.responders import last_user_text
from tests.corpus_data import QUESTIONS, ROOT
from tests.passkey_api import MODEL

SEED_FILE = ROOT.parent / "shared" / "seeds" / "000_4740b4a9b98693a5.txt"


@pytest.fixture(scope="module")
def notebook() -> str:
    if not SEED_FILE.is_file():
        pytest.skip(f"{SEED_FILE} not found (the study's notebook, beside the checkout)")
    # The notebook writes its prompts as Python literals starting with the two characters \n\n.
    return SEED_FILE.read_text(encoding="utf-8").replace("\\n", "\n")


@pytest.mark.parametrize("template", [P.ONE_CHUNK, P.ONE_CHUNK_SCRATCHPAD, P.NONGOV_EXAMPLES,
                                      P.NONGOV_EXAMPLES_SCRATCHPAD], ids=lambda t: t.id)
def test_source_templates_are_the_notebooks_literals(notebook: str, template: Any) -> None:
    assert f'"""{template.text}"""' in notebook


def test_context_example_prompts_are_the_notebooks_generators(notebook: str) -> None:
    """In [54]/[55] build their prompt from pieces; each piece of ours is in the notebook in that order."""
    for template in (P.CONTEXT_EXAMPLES, P.CONTEXT_EXAMPLES_SCRATCHPAD):
        head, tail = template.text.split("{examples_section}")
        assert f'"""{head}""" + examples_section + """{tail}"""' in notebook
    assert f'examples_section = "{P.EXAMPLES_INTRO}"' in notebook
    block = P.EXAMPLE_BLOCK.text.replace("{sample_question}", '{sample_question""" + str(i+1) + """}')
    block = block.replace("{sample_answers}", '{sample_answers""" + str(i+1) + """}')
    block = block.replace("{correct_answer}", '{correct_answer""" + str(i+1) + """}')
    assert f'examples_section += """{block}"""' in notebook


def test_human_assistant_prompt_becomes_a_user_turn_and_a_prefill() -> None:
    text = P.ONE_CHUNK.render(chunk="RECORD", question="Q?", answers="['A. x', 'B. y']")
    request = source.to_request(text, P.ONE_CHUNK.ref)
    assert request.messages[0].role == "user"
    assert request.messages[0].content.startswith("Please read the following government record closely")
    assert request.messages[0].content.endswith("<Answers>\n['A. x', 'B. y']\n</Answers>")
    assert request.prefill == "Based on the government record provided, the correct answer to the question is:"
    assert (request.max_tokens, request.stop) == (3000, ("\n\nHuman:", "\n\nAssistant:"))
    scratch = source.to_request(P.ONE_CHUNK_SCRATCHPAD.render(chunk="R", question="Q", answers="[]"), "t")
    assert scratch.prefill is None


@pytest.mark.parametrize(("completion", "parsed"), [
    (" <Answer>B</Answer>", "B"), ("\n<Answer>\nD. 212\n</Answer>", "D"), ("<Answer>C", "C"),
    ("The answer is B", "_"), ("<Answer>b</Answer>", "b"), ("<Answer> </Answer>", "_"),
    ("<scratchpad>x</scratchpad><Answer>A</Answer><Answer>C</Answer>", "A"), ("<answer>B</answer>", "_"),
])
def test_answers_are_parsed_as_the_study_did(completion: str, parsed: str) -> None:
    assert source.parse_answer(completion) == parsed


def _pieces(n: int, rng: random.Random) -> list[Unit]:
    return [Unit(f"p{i:03d}", f"text {i}", rng.randrange(200, 5000)) for i in range(n)]


@pytest.mark.parametrize("position", ["beginning", "middle", "end"])
def test_source_layout_places_the_relevant_chunk_once(position: str) -> None:
    ps = _pieces(40, random.Random(3))
    fillers = fill_close(ps[0], ps[1:], 60_000, random.Random(1))
    collage = source.place(ps[0], fillers, position)
    assert collage.ids().count("p000") == 1
    assert collage.gold_index == {"beginning": 0, "middle": 19, "end": len(fillers)}[position]


@pytest.mark.parametrize("budget", [1000, 2000, 8000, 30_000, 70_000])
def test_fill_lands_within_tolerance_and_never_over(budget: int) -> None:
    for seed in range(20):
        ps = _pieces(80, random.Random(seed))
        gold = min(ps, key=lambda p: p.tokens)
        used = gold.tokens + sum(p.tokens for p in fill_close(gold, ps, budget, random.Random(seed)))
        assert used <= budget
        if budget >= 8000:  # small budgets can be infeasible (no pieces small enough): those questions are not asked
            assert budget - tolerance(budget) <= used


def test_sizes_the_corpus_cannot_fill_are_named_in_one_line() -> None:
    kept, note = choose_sizes([70_000, 95_000, 150_000], 116_000, source="FR 2024-02-12", explicit=True)
    assert kept == [70_000, 95_000]
    assert note is not None and "150,000" in note and "116,000" in note and "\n" not in note


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter()


def small_issue(folder: Path, date: str, sections: int) -> Path:
    """A tiny Federal Register issue in the XML shape the splitter reads: agency sections ending in BILLING CODE."""
    body = "".join(
        f"<RULE><AGENCY>DEPARTMENT OF TRANSPORTATION</AGENCY><P>Section {i} of {date}. "
        + " ".join(f"Paragraph {j} about runway {i}-{j} lighting and its maintenance schedule." for j in range(40))
        + f"</P><FRDOC>[FR Doc. 2099-{9000 + i} Filed 2-12-24; 8:45 am]</FRDOC><BILCOD>BILLING CODE 4910-13-P"
          "</BILCOD></RULE>" for i in range(sections))
    path = folder / f"FR-{date}.xml"
    path.write_text(f"<FEDREG><RULES>{body}</RULES></FEDREG>", encoding="utf-8")
    return path


def test_a_second_issue_adds_distractors_and_capacity(tmp_path: Path, fr_xml: Path, counter: TiktokenCounter,
                                                      ) -> None:
    extra_xml = small_issue(tmp_path, "2024-02-13", 20)
    main = load_issue(fr_xml, "2024-02-12", counter, tmp_path)
    extra = load_issue(extra_xml, "2024-02-13", counter, tmp_path)
    assert len(extra.sections) >= 10
    questions = load_questions(QUESTIONS)
    alone = QaData.load(main, questions, counter.count, counter.name, tmp_path, 0, "fake/perfect")
    both = QaData.load(main, questions, counter.count, counter.name, tmp_path, 0, "fake/perfect", extra=[extra])
    assert both.capacity() > alone.capacity() + 10_000
    budget = alone.capacity() + 6000  # more than one issue holds
    question = both.question(0, budget)
    built = both.build(question, budget, "middle", "seed")
    assert budget - tolerance(budget) <= built.tokens <= budget
    assert any(p.id.startswith("2024-02-13:") for p in built.collage.units)
    assert built.text.count(both.pieces[question.section_id].text.strip("\n")) == 1
    with pytest.raises(ValueError, match="short of"):
        alone.build(question, budget, "middle", "seed")


EVALS = ROOT / "evals" / "qa"


def run_evals(pytester: pytest.Pytester, data_dir: Path, out: str, *args: str, model: str = "fake/perfect",
              ) -> tuple[pytest.RunResult, dict[str, Any]]:
    report = pytester.path / out
    result = pytester.runpytest_subprocess(
        str(EVALS), "-p", "no:cacheprovider", "--longctx-model", model, "--longctx-data-dir", str(data_dir),
        "--longctx-report-dir", str(report), "--longctx-cache-dir", str(pytester.path / "cache"), *args, timeout=300)
    path = report / "longctx.json"
    assert path.is_file(), result.stdout.str()
    return result, json.loads(path.read_text(encoding="utf-8"))


def test_source_protocol_through_the_local_messages_api(pytester: pytest.Pytester, api: Any, fr_xml: Path) -> None:
    """The study's prompts reach a Messages API as a user turn (plus the prefill of the plain prompt)."""
    def respond(body: dict[str, Any]) -> str:
        return "<scratchpad>quotes</scratchpad>\n<Answer>B</Answer>" if "scratchpad" in last_user_text(body) \
            else " <Answer>B</Answer>"

    srv = api(respond)
    result, record = run_evals(pytester, fr_xml.parent, "r", "--longctx-protocol", "source", "--longctx-samples",
                               "2", "--longctx-context-sizes", "30000", model=MODEL)
    assert result.ret == 0, result.stdout.str()
    qa = [t for t in record["trials"] if t["experiment"] == "qa"]
    assert len(qa) == 48 and record["settings"]["protocol"] == "source"
    assert all(t["outcome"] in ("correct", "incorrect") and t["detail"]["protocol"] == "source"
               for t in record["trials"])
    assert {t["detail"]["source_parse"] for t in qa} == {"B"}
    assert all(29_400 <= t["detail"]["context_tokens_actual"] <= 30_000 for t in qa)
    middle = [t for t in qa if t["params"]["position"] == "middle"]
    # "middle" is chunk index 20 (19 sections before it), or the end of a collage with fewer sections
    assert all(t["detail"]["gold_index"] == min(19, t["detail"]["sections"] - 1) for t in middle)
    assert any(t["detail"]["gold_index"] == 19 for t in middle)
    bodies = srv.stats.requests
    assert len(bodies) == 52
    for body in bodies:  # the record ends the prompt-cache prefix (every variant of a cell shares it)
        shared, rest = body["messages"][0]["content"]
        assert shared["cache_control"] == {"type": "ephemeral"} and rest["text"].startswith("\n</Government Record>")
        user = shared["text"] + rest["text"]
        assert user.startswith("Please read the following government record closely") and "<Government Record>" in user
        assert body["max_tokens"] == 3000 and body["stop_sequences"] == ["\n\nHuman:", "\n\nAssistant:"]
    prefilled = [b for b in bodies if b["messages"][-1]["role"] == "assistant"]
    assert {b["messages"][-1]["content"] for b in prefilled} == {
        "Based on the government record provided, the correct answer to the question is:"}
    assert len(prefilled) == 2 * 3 + 4  # plain/none at three positions, baseline and control
    tables = [t for t in record["tables"] if t["experiment"] == "qa"]
    assert tables[0]["columns"] == ["prompt variant", "beginning", "middle", "end"] and len(tables[0]["rows"]) == 8
    assert "30,000" in tables[0]["title"] and tables[-1]["title"].startswith("QA context sizes")


def test_samples_all_runs_the_whole_baseline_then_exactly_its_right_answers(pytester: pytest.Pytester,
                                                                            fr_xml: Path) -> None:
    data = pytester.path / "data"
    data.mkdir()
    shutil.copy(fr_xml, data / fr_xml.name)
    args = ("-rs", "--longctx-samples", "all", "--longctx-context-sizes", "8000", "-k",
            "right_section or (position and plain and none and beginning)")
    first, rec1 = run_evals(pytester, data, "r1", *args, model="fake/random")
    assert first.ret == 0, first.stdout.str()
    questions = len(load_questions(QUESTIONS))
    baseline = [t for t in rec1["trials"] if t["experiment"] == "qa-baseline"]
    assert len(baseline) == questions and not [t for t in rec1["trials"] if t["experiment"] == "qa"]
    assert "this run completes the baseline" in first.stdout.str()
    right = {t["item"] for t in baseline if t["outcome"] == "correct"}
    second, rec2 = run_evals(pytester, data, "r2", *args, model="fake/random")
    assert second.ret == 0, second.stdout.str()
    qa = [t for t in rec2["trials"] if t["experiment"] == "qa"]
    assert sorted(t["item"] for t in qa) == sorted(right)  # every question it got right, once each, no other
    assert all(t["detail"]["baseline_excluded"] == questions - len(right) and t["detail"]["baseline_file"]
               for t in qa)


@pytest.mark.parametrize(("args", "message"), [
    (["--longctx-protocol", "paper"], "--longctx-protocol: expected source or longctx, got 'paper'"),
    (["--longctx-context-sizes", "70000,lots"], "--longctx-context-sizes: expected a whole number, got 'lots'"),
    (["--longctx-protocol", "source", "--longctx-scoring", "logprob", "--longctx-model", "local/smollm2-135m"],
     "--longctx-scoring: logprob is not the source protocol's scoring"),
], ids=["protocol", "sizes", "source-logprob"])
def test_bad_qa_options_are_one_line_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    args = args if "--longctx-model" in args else ["--longctx-model", "fake/perfect", *args]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr.str()


def test_sizes_from_the_ini_and_unfillable_sizes(pytester: pytest.Pytester, fr_xml: Path) -> None:
    """``longctx_context_sizes`` in the ini chooses sizes; a size beyond the corpus is not generated, and says so."""
    pytester.makefile(".ini", pytest="[pytest]\nlongctx_context_sizes = 3000, 500000\n")
    result, record = run_evals(pytester, fr_xml.parent, "r", "--longctx-samples", "1", "-c", "pytest.ini",
                               "--rootdir", str(ROOT), "-k", "position and plain and none")
    assert result.ret == 0, result.stdout.str()
    assert {t["params"]["context_tokens"] for t in record["trials"] if t["experiment"] == "qa"} == {3000}
    sizes = next(t for t in record["tables"] if t["title"].startswith("QA context sizes"))
    assert "500,000 tokens (asked for) exceed the" in sizes["note"]
    assert "500,000 tokens (asked for) exceed the" in result.stdout.str()
    only_big = pytester.runpytest_subprocess(str(EVALS), "-p", "no:cacheprovider", "--longctx-model", "fake/perfect",
                                             "--longctx-data-dir", str(fr_xml.parent), "--longctx-context-sizes",
                                             "500000", "--longctx-cache-dir", str(pytester.path / "c"))
    assert only_big.ret == pytest.ExitCode.USAGE_ERROR
    assert "500,000 tokens (asked for) exceed the" in only_big.stderr.str() + only_big.stdout.str()


def test_study_table_layout_and_chance_on_every_qa_chart() -> None:
    from pytest_longctx.experiments.qa.report import qa_figures, qa_tables

    cells, trials = [], []
    for size in (70_000, 95_000):
        for prompt in ("plain", "scratchpad"):
            for examples in ("none", "context-5"):
                for i, pos in enumerate(("beginning", "middle", "end")):
                    params = {"context_tokens": size, "examples": examples, "position": pos, "prompt": prompt}
                    cells.append({"experiment": "qa", "params": params, "correct": i, "n": 4})
                    trials.append({"experiment": "qa", "params": params, "detail": {
                        "context_tokens_actual": size - 300 - i, "protocol": "source", "baseline_excluded": 12,
                        "baseline_file": "b.json", "tokenizer": "tiktoken/cl100k_base"}})
    cells.append({"experiment": "qa", "params": {"context_tokens": 95_000, "depth": 50}, "correct": 1, "n": 4})
    tables = qa_tables(cells, trials)
    assert len(tables) == 3 and "70,000-token" in tables[0]["title"] and "95,000-token" in tables[1]["title"]
    first = tables[0]
    assert first["columns"] == ["prompt variant", "beginning", "middle", "end"]
    assert [r[0] for r in first["rows"]] == ["plain", "scratchpad", "plain + 5 examples from the context",
                                            "scratchpad + 5 examples from the context"]
    assert first["rows"][0][1:] == [{"correct": 0, "n": 4}, {"correct": 1, "n": 4}, {"correct": 2, "n": 4}]
    assert "12 questions excluded (b.json)" in first["note"] and "protocol source" in first["title"]
    assert tables[-1]["rows"][0][:2] == ["70,000", "12"]
    figures = [f for f in qa_figures(cells, trials) if f is not None]
    assert len(figures) == 3 and all("chance 0.25" in f.svg for f in figures)


def test_fr_date_list_reaches_a_size_one_issue_cannot_fill(pytester: pytest.Pytester, fr_xml: Path) -> None:
    """``--longctx-fr-date A,B``: B's sections join the distractor pool, so 120,000 tokens can be filled."""
    data = pytester.path / "data"
    data.mkdir()
    shutil.copy(fr_xml, data / fr_xml.name)
    small_issue(data, "2024-02-13", 20)
    args = ("--longctx-samples", "2", "--longctx-context-sizes", "120000", "-k", "position and plain and none")
    alone = pytester.runpytest_subprocess(str(EVALS), "-p", "no:cacheprovider", "--longctx-model", "fake/perfect",
                                          "--longctx-data-dir", str(data), "--longctx-cache-dir",
                                          str(pytester.path / "c"), *args)
    assert alone.ret == pytest.ExitCode.USAGE_ERROR and "120,000 tokens (asked for) exceed" in alone.stderr.str()
    result, record = run_evals(pytester, data, "r", "--longctx-fr-date", "2024-02-12,2024-02-13", *args)
    assert result.ret == 0, result.stdout.str()
    qa = [t for t in record["trials"] if t["experiment"] == "qa"]
    assert len(qa) == 6 and all(t["detail"]["distractor_issues"] == 1 for t in qa)
    assert all(120_000 - tolerance(120_000) <= t["detail"]["context_tokens_actual"] <= 120_000 for t in qa)
    assert all(t["item"].startswith("2024-") and t["detail"]["section"] in t["item"] for t in qa)
