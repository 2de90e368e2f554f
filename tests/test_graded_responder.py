"""The graded responder (``graded:<spec>``): a model of known accuracy, on prompts built by the suite's own builders.

Every prompt here comes from an experiment's request builder and is sent as the Anthropic backend would send it
(``build_params``); every reply is scored by the experiment's own scorer. The counts are seeded: each test pins the
exact count for its seed and checks it against a binomial bound (4 standard deviations) around the rule's rate.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest

from pytest_longctx import Request
from pytest_longctx.backends.anthropic import build_params
from pytest_longctx.experiments.docs import source as docs_source
from pytest_longctx.experiments.docs.experiment import DocsExperiment
from pytest_longctx.experiments.docs.judge import judge_request, parse_verdict
from pytest_longctx.experiments.docs.scorers import score
from pytest_longctx.experiments.litm.metric import best_subspan_em, kv_correct
from pytest_longctx.experiments.litm.prompts import kv_request, qa_request
from pytest_longctx.experiments.lrt.files import LrtFile, build_file, build_source_file, explain
from pytest_longctx.experiments.lrt.prompts import lrt_request
from pytest_longctx.experiments.qa import source as qa_source
from pytest_longctx.experiments.qa.mcqa import EXAMPLES, PROMPTS, Shuffled, build_request, shuffle_options
from pytest_longctx.experiments.qa.questions import Question, load_questions
from pytest_longctx.experiments.qa.scoring import extract_choice
from pytest_longctx.server import MessagesServer, approx_token_count
from pytest_longctx.server.graded import Graded, parse_spec
from pytest_longctx.server.graded_prompts import UnrecognisedPrompt

ROOT = Path(__file__).resolve().parents[1]
QA_KEY = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"
GENERAL = ROOT / "fixtures" / "qa" / "general_examples.jsonl"
DOCS = ROOT / "fixtures" / "docs"
SHUFFLES = ("none", "full", "block-5", "block-20")


def body(request: Request, model: str = "claude-a") -> dict[str, Any]:
    """The Messages API body the Anthropic backend sends for ``request``."""
    return build_params(model, request)


def sent(graded: Graded, request: Request, model: str = "claude-a") -> tuple[bool, str]:
    """``(right by the rule, the answer as the client reads it: prefill + reply)``."""
    params = body(request, model)
    return graded.verdict(params).right, (request.prefill or "") + graded(params)


def within(k: int, n: int, p: float) -> bool:
    """``k`` of ``n`` within 4 binomial standard deviations of ``n * p``."""
    return abs(k - n * p) <= 4 * math.sqrt(n * p * (1 - p)) + 1e-9


def lrt_files(n: int, lines: int = 100, seed: int = 0, build: Callable[..., LrtFile] = build_file) -> list[LrtFile]:
    rng = random.Random(seed)
    return [build(lines, SHUFFLES[i % len(SHUFFLES)], rng) for i in range(n)]


def rights(graded: Graded, files: list[LrtFile], model: str = "claude-a") -> list[bool]:
    return [graded.verdict(body(lrt_request(f), model)).right for f in files]


@pytest.fixture(scope="module")
def files() -> list[LrtFile]:
    return lrt_files(400)


# -- lrt: the rule's rate, the scorer's verdict, a neighbour's value when wrong ---------------------------------


def test_lrt_answers_right_at_the_accuracy_and_misses_name_a_neighbouring_line(files: list[LrtFile]) -> None:
    graded = Graded("accuracy=0.85,seed=1")
    right = 0
    for file in files:
        ok, answer = sent(graded, lrt_request(file))
        scored = explain(file, answer)
        assert scored["correct"] == ok
        if not ok:  # another line's value, next to the asked one: the miss analysis has something to report
            assert scored["miss_distance"] in (-1, 1) and not scored["not_in_file"]
        right += ok
    assert right == 338 and within(right, len(files), 0.85)
    for file in lrt_files(100, lines=50, build=build_source_file):  # values repeat: still a value that differs
        ok, answer = sent(graded, lrt_request(file))
        assert explain(file, answer)["correct"] == ok


def test_versions_of_one_model_agree_on_items_and_other_seeds_do_not(files: list[LrtFile]) -> None:
    high = rights(Graded("accuracy=0.85,seed=1"), files)
    low = rights(Graded("accuracy=0.80,seed=1"), files)
    assert all(h for h, lo in zip(high, low, strict=True) if lo)  # the 0.80 model's right items: a subset
    assert sum(high) - sum(low) == 22 and within(sum(high) - sum(low), len(files), 0.05)
    other = rights(Graded("accuracy=0.80,seed=2"), files)
    agree = sum(h == o for h, o in zip(high, other, strict=True))
    assert agree == 289 and within(agree, len(files), 0.85 * 0.80 + 0.15 * 0.20)  # independent draws


def test_flips_invert_outcomes_at_the_rate_given_and_differ_between_runs(files: list[LrtFile]) -> None:
    plain = Graded("accuracy=0.85,seed=1")
    runs = [Graded(f"accuracy=0.85,seed=1,flip=0.1,flip-seed={s}") for s in (1, 2)]
    for run in runs:
        verdicts = [run.verdict(body(lrt_request(f))) for f in files]
        changed = [v.right != p for v, p in zip(verdicts, rights(plain, files), strict=True)]
        assert changed == [v.flipped for v in verdicts]
        assert within(sum(changed), len(files), 0.1)
    one, two = (rights(run, files) for run in runs)
    differ = sum(a != b for a, b in zip(one, two, strict=True))
    assert differ == 64 and within(differ, len(files), 2 * 0.1 * 0.9)


def test_accuracy_by_model_and_by_prompt_length() -> None:
    graded = Graded("claude-a=0.9,claude-b=0.6,seed=3")
    short = lrt_files(300, seed=1)
    for model, accuracy in (("claude-a", 0.9), ("claude-b", 0.6)):
        assert within(sum(rights(graded, short, model)), len(short), accuracy)
    with pytest.raises(LookupError, match=r"no accuracy for model 'claude-c'; add claude-c=ACC or accuracy=ACC"):
        graded.verdict(body(lrt_request(short[0]), "claude-c"))

    by_length = Graded("accuracy=0.95@1000,0.55@8000")
    assert by_length.spec.accuracy is not None and by_length.spec.accuracy.at(4500) == pytest.approx(0.75)
    long = lrt_files(150, lines=1200, seed=2)
    tokens = [approx_token_count(lrt_request(f).messages[0].content) for f in (short[0], long[0])]
    assert tokens[0] < 1000 and tokens[1] > 8000
    assert within(sum(rights(by_length, short)), len(short), 0.95)
    assert within(sum(rights(by_length, long)), len(long), 0.55)


# -- qa: the final question's letter from the key, in every prompt variant and both protocols ---------------------


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return load_questions(QA_KEY)


def qa_prompts(questions: list[Question], question: Question, rng: random.Random) -> list[tuple[Request, Shuffled]]:
    """The question in every prompt variant of both protocols (worked examples about other questions included)."""
    general = load_questions(GENERAL)
    out = []
    for prompt in PROMPTS:
        for examples in EXAMPLES:
            item = shuffle_options(question, rng)
            pool = general if examples.startswith("general") else [q for q in questions if q.id != question.id]
            count = 0 if examples == "none" else int(examples.rsplit("-", 1)[1])
            shots = [shuffle_options(q, rng) for q in rng.sample(pool, count)]
            out.append((build_request("<section>\nThe record.\n</section>", item, prompt, shots), item))
            out.append((qa_source.build_request("The record.", item, prompt, examples, shots), item))
    item = shuffle_options(question, rng)
    out.append((build_request("<section>\nThe record.\n</section>", item, "plain", [], scoring="logprob"), item))
    return out


def test_qa_answers_the_final_question_by_the_key_in_every_variant(questions: list[Question]) -> None:
    graded = Graded(f"accuracy=0.7,seed=4,rho=0,qa-key={QA_KEY}")
    rng = random.Random(5)
    right = total = 0
    for question in questions[:60]:
        for request, item in qa_prompts(questions, question, rng):
            verdict = graded.verdict(body(request))
            ok, answer = sent(graded, request)
            if request.template.startswith("study"):  # the source protocol reads its first <Answer> tag
                given: str | None = qa_source.parse_answer(answer[len(request.prefill or ""):])
            else:
                given = extract_choice(answer, item.options)
            assert (verdict.experiment, verdict.item) == ("qa", question.id)  # never a worked example's question
            assert given in item.letters() and (given == item.letter) == ok
            right, total = right + ok, total + 1
    assert total == 60 * 17 and right == 718 and within(right, total, 0.7)


@pytest.mark.parametrize(("rho", "mixed"), [(1.0, 0), (0.0, 100)])
def test_rho_decides_whether_a_question_is_right_or_wrong_in_every_cell_together(
        questions: list[Question], rho: float, mixed: int) -> None:
    graded = Graded(f"accuracy=0.5,seed=6,rho={rho},qa-key={QA_KEY}")
    rng = random.Random(7)
    outcomes = {q.id: {sent(graded, r)[0] for r, _ in qa_prompts(questions, q, rng)} for q in questions[:100]}
    assert sum(len(seen) == 2 for seen in outcomes.values()) == mixed  # rho=0: 17 independent draws per question


# -- docs and litm ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["longctx", "source"])
def test_docs_answers_from_the_key_and_judges_every_answer_right(protocol: str) -> None:
    graded = Graded(f"accuracy=0.6,seed=8,docs-key={DOCS}")
    docs = DocsExperiment.load(DOCS, count_tokens=approx_token_count, budget=20_000, protocol=protocol)
    verdicts = []
    for item in docs.items:
        for depth in (0, 50, 100):
            request = docs.question(item, docs.render(docs.at_depth(item, depth)))
            verdict = graded.verdict(body(request))
            scores = score(graded(body(request)), item.golds)
            assert verdict.item == item.id and scores.subspan == scores.em == verdict.right
            judge = (docs_source.judge_request(item.question, item.answer, verdict.reply) if protocol == "source"
                     else judge_request(item.question, " / ".join(item.golds), verdict.reply))
            assert parse_verdict(graded(body(judge))) == verdict.right  # the judge is never graded: always right
            verdicts.append(verdict.right)
    assert len(set(verdicts[0::3])) == 2 and verdicts[0::3] == verdicts[1::3] == verdicts[2::3]  # rho=1: per item


def litm_key(folder: Path) -> Path:
    """A small file in the layout of Lost in the Middle's nq-open-oracle.jsonl.gz."""
    path = folder / "nq-open-oracle.jsonl.gz"
    rows = [{"question": f"who wrote book number {i}", "answers": [f"Author {i}", f"A. {i}"], "ctxs": []}
            for i in range(200)]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in rows)
    return path


@pytest.mark.e2e
def test_litm_answers_questions_from_the_corpus_and_values_from_the_prompt(tmp_path: Path) -> None:
    graded = Graded(f"accuracy=0.75,seed=9,litm-key={litm_key(tmp_path)}")
    right = 0
    for i in range(200):
        documents = [("Author", f"Author {i} wrote it."), ("Other", "Nothing here.")] if i % 2 else []
        verdict = graded.verdict(body(qa_request(f"who wrote book number {i}", documents)))
        assert verdict.item == f"nq-open-{i}"
        assert best_subspan_em(verdict.reply, [f"Author {i}", f"A. {i}"]) == verdict.right
        right += verdict.right
    assert right == 147 and within(right, 200, 0.75)
    rng = random.Random(10)
    for _ in range(100):
        records = [(f"{rng.getrandbits(64):016x}", f"{rng.getrandbits(64):016x}") for _ in range(20)]
        key, value = records[rng.randrange(20)]
        verdict = graded.verdict(body(kv_request(records, key)))
        assert verdict.item == f"kv-{key}" and kv_correct(value, verdict.reply) == verdict.right
        assert verdict.right or verdict.reply in dict(records).values()  # a wrong value is a neighbour's


# -- failing loudly ---------------------------------------------------------------------------------------------


def test_a_prompt_it_cannot_place_fails_the_request(questions: list[Question]) -> None:
    graded = Graded(f"accuracy=0.9,qa-key={QA_KEY}")
    with pytest.raises(UnrecognisedPrompt, match="no experiment of the suite asks this prompt: 'What is 2"):
        graded.verdict(body(Request.user("What is 2 + 2?", max_tokens=8)))
    unknown = Question("x/q1", "x", "text", "Which bridge is the longest in Atlantis?", "A", ("B", "C", "D"), "e")
    request = build_request("<section>\nThe record.\n</section>", shuffle_options(unknown, random.Random(0)),
                            "plain", [])
    with pytest.raises(UnrecognisedPrompt, match=rf"a qa question not in the qa-key {QA_KEY}: 'Which bridge"):
        graded.verdict(body(request))
    with pytest.raises(UnrecognisedPrompt, match="no qa-key=FILE in the graded spec"):
        Graded("accuracy=0.9").verdict(body(request))
    with MessagesServer(graded) as srv:  # through the real SDK: a 500 api_error naming the problem
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="test-key", max_retries=0)
        with pytest.raises(anthropic.InternalServerError, match="graded: no experiment of the suite asks"):
            client.messages.create(model="claude-a", max_tokens=8, messages=[{"role": "user", "content": "Hi"}])


BAD_SPECS = [
    ("", "gives no accuracy; add accuracy=ACC or MODEL=ACC"),
    ("seed=1", "gives no accuracy"),
    ("accuracy=1.5", "accuracy=1.5: expected a number between 0 and 1"),
    ("accuracy=0.9,flip=often", "flip=often: expected a number between 0 and 1"),
    ("accuracy=0.9,seed=x", "seed=x: expected a whole number"),
    ("accuracy=0.9@lots", "expected ACC or ACC@TOKENS,ACC@TOKENS,..."),
    ("accuracy=0.9@2000,0.8@1000", "token counts must increase"),
    ("accuracy=0.9,accuracy=0.8", "accuracy is set twice"),
    ("accuracy=0.9,rho=0.5,0.6@100", "rho=0.5,0.6@100: one value only"),
    ("accuracy=0.9,banana", "'banana' in 'accuracy=0.9,banana': expected NAME=VALUE"),
    ("accuracy=0.9,qa-key=/nowhere/q.jsonl", "qa-key: /nowhere/q.jsonl: no such file"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS, ids=[m.split(":")[0][:20] for _, m in BAD_SPECS])
def test_a_bad_spec_is_a_one_line_error(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^graded: ") as caught:
        Graded(spec)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_key_file_names_its_line(tmp_path: Path) -> None:
    key = tmp_path / "q.jsonl"
    key.write_text('{"id": "a", "question": "Q?", "answer": "A"}\n{"id": "b", "answer": "B"}\n')
    with pytest.raises(ValueError, match=rf"^graded: {key}:2: 'question' must be a non-empty string$"):
        Graded(f"accuracy=0.9,qa-key={key}")


def test_the_cli_serves_the_graded_model_and_rejects_a_bad_spec(files: list[LrtFile]) -> None:
    spec = "accuracy=0.85,seed=1,flip=0.1"
    command = [sys.executable, "-m", "pytest_longctx.server", "--port", "0", "--responder", f"graded:{spec}"]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            client = anthropic.Anthropic(base_url=process.stdout.readline().strip(), api_key="test-key",
                                         max_retries=0)
            graded = Graded(spec)
            for file in files[:20]:
                params = body(lrt_request(file), "claude-test")
                reply = client.messages.create(**params).content[0].text
                assert reply == graded.verdict(params).reply
        finally:
            process.terminate()
            assert process.wait(timeout=10) == 0
    bad = subprocess.run([*command[:-1], "graded:accuracy=1.5"], cwd=ROOT, capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and bad.stderr.splitlines()[-1].endswith(
        "error: graded: accuracy=1.5: expected a number between 0 and 1")
    shown = subprocess.run([*command[:3], "--help"], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout
    assert "graded:<spec>" in shown and "flip-seed=N" in shown and "ACC@TOKENS" in shown


def test_parse_spec_reads_every_setting() -> None:
    spec = parse_spec("claude-a=0.85,claude-b=0.9@100,0.5@200,flip=0.02,seed=3,flip-seed=4,rho=0.5")
    assert (spec.flip, spec.seed, spec.flip_seed, spec.rho, spec.accuracy) == (0.02, 3, 4, 0.5, None)
    assert spec.models["claude-a"].at(10**6) == 0.85 and spec.models["claude-b"].at(150) == pytest.approx(0.7)
