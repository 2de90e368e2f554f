"""What the graded model reads in a prompt: which experiment asks, about which item, the right answer and a wrong one.

The server knows no experiment module (import contract): each prompt is recognised by its own wording with
regular expressions, and the answers come from answer keys read from files (:class:`AnswerKeys`).

* ``lrt``: ``[EXECUTE THIS]: Go to line k``; right: line k's value; wrong: a neighbouring line's (k-1 or k+1,
  or the nearest line holding another value). Item: a digest of the prompt (each trial draws its own file).
* ``qa``: the last ``<question>``/``<options>`` (longctx) or ``<Question>``/``<Answers>`` (the study's source
  prompts) of the prompt, so worked examples before it never count; right: the letter whose option is the key's
  answer; wrong: another letter. Item: the question's id in the key.
* ``docs``: the answer prompts (longctx, source), asked by the question or its paraphrase; right: the key's answer;
  wrong: the answer of an item's distractor sentence found in the prompt, else another item's answer. The
  abstention prompt: right is the key's answer when the prompt holds the item's document (``[Document: NAME]``),
  else "Not in the documents."; wrong: another item's answer.
  ``docs-judge``: the judge prompts (longctx, source), always judged right (gold a word-aligned part of the answer).
* ``litm-qa`` (search results or closed book): right: the first gold answer; wrong: another question's answer.
  ``litm-kv``: right: the asked key's value in the prompt's JSON; wrong: a neighbouring record's value.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import re
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The docs experiment's QA file inside a documents folder.
DOCS_QA_FILE = "longctx-qa.jsonl"
_WS = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "‘’“”–—")

_LRT_ASK = re.compile(r"\[EXECUTE THIS\]: Go to line (\d+) and report only REGISTER_CONTENT")
_QA_OPTIONS = re.compile(r"<question>(.*?)</question>\s*<options>\n(.*?)\n</options>", re.S)
_QA_SOURCE_QUESTION = re.compile(r"<Question>\n(.*?)\n</Question>", re.S)
_QA_SOURCE_ANSWERS = re.compile(r"<Answers>\n(.*?)\n</Answers>", re.S)
_OPTION_SPLIT = re.compile(r"\n(?=[A-D]\. )")
_DOCS_ANSWER = ("Answer the question using the documents below.", "\nQuestion: (.*)\nAnswer with a short phrase "
                "from the documents, on one line, and nothing else.")
_DOCS_SOURCE_ANSWER = ("Using only the context provided, answer the question in a few words.",
                       r"\nQuestion: (.*)\nAnswer:")
_DOCS_ABSTAIN = ("Answer the question using only the documents below. They may not contain the answer.",
                 "\nQuestion: (.*)\nAnswer with a short phrase from the documents, on one line, and nothing else. "
                 "If the documents do not answer the question, reply: (.*)")
_JUDGE = ("You are grading an answer to a question about a document.",
          r"\nQuestion: (?P<q>.*?)\nGold answer: (?P<gold>.*?)\nAnswer to grade: (?P<answer>.*?)\n\nThe answer is")
_JUDGE_SOURCE = ("For the question provided, return a JSON object with a `correct` key",
                 r"\nQuestion: (?P<q>.*?)\nAnswer: (?P<answer>.*?)\nGold standard answer: (?P<gold>.*)\nJSON:")
_LITM_QA = ("Write a high-quality answer for the given question using only the provided search results",
            r"\n\nQuestion: (.*)\nAnswer:")
_LITM_KV = ("Extract the value corresponding to the specified key in the JSON object below.",
            r"JSON data:\n(?P<records>.*)\n\nKey: \"(?P<key>.*)\"\nCorresponding value:")


class UnrecognisedPrompt(ValueError):
    """A prompt the graded model cannot place (a bug in the test's set-up: the server answers a 500)."""


@dataclass(frozen=True)
class Task:
    """One request as the graded model understands it.

    ``graded`` is False for a judge: its verdict is always right (it grades, it is not graded).
    """

    experiment: str
    item: str
    right: str
    wrong: str
    graded: bool = True


def draw(*parts: object) -> float:
    """A uniform number in [0, 1) from a hash of ``parts`` (the same on every machine and process)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def squash(text: str) -> str:
    """Whitespace collapsed: the form questions are looked up in."""
    return _WS.sub(" ", text).strip()


def normalize(text: str) -> str:
    """SQuAD normalisation (lower case, no punctuation, no articles, single spaces), as the scorers use it."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def contains(answer: str, gold: str) -> bool:
    """Whether normalised ``gold`` is a word-aligned part of normalised ``answer`` (never true for an empty gold)."""
    return bool(normalize(gold)) and f" {normalize(gold)} " in f" {normalize(answer)} "


# -- answer keys -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Keyed:
    """One item of an answer key: its id and its accepted answers (the first is the one the model replies)."""

    id: str
    answers: tuple[str, ...]
    #: docs: the item's document, and its distractor sentences as (text, answer)
    doc: str = ""
    distractors: tuple[tuple[str, str], ...] = ()


@dataclass
class AnswerKeys:
    """Question text (whitespace collapsed) -> item, per experiment; with the files they came from."""

    qa: dict[str, Keyed] = field(default_factory=dict)
    docs: dict[str, Keyed] = field(default_factory=dict)
    litm: dict[str, Keyed] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    def find(self, kind: str, question: str) -> Keyed:
        table: dict[str, Keyed] = getattr(self, kind)
        found = table.get(squash(question))
        if found is None:
            where = self.files.get(kind)
            source = f"the {kind}-key {where}" if where else f"no {kind}-key=FILE in the graded spec"
            raise UnrecognisedPrompt(f"graded: a {kind} question not in {source}: {question[:100]!r}")
        return found

    def others(self, kind: str) -> list[Keyed]:
        """Every item of one key, in file order (wrong answers are drawn from them)."""
        return list(getattr(self, kind).values())


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a JSON-lines file (gzip'd when it ends in .gz); bad input: one-line ValueError."""
    try:
        opened = gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")
        with opened as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"graded: {path}: cannot read the answer key ({exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"graded: {path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"graded: {path}:{number}: expected a JSON object")
        yield number, row


def _text(row: dict[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"graded: {where}: '{name}' must be a non-empty string")
    return value.strip()


def load_key(kind: str, path: Path, keys: AnswerKeys) -> None:
    """Read one answer key into ``keys`` (``qa``: the question file; ``docs``: the QA file or its folder;
    ``litm``: nq-open-oracle.jsonl.gz). The first item of a repeated question wins."""
    if kind == "docs" and path.is_dir():
        path = path / DOCS_QA_FILE
    if not path.is_file():
        raise ValueError(f"graded: {kind}-key: {path}: no such file")
    table: dict[str, Keyed] = getattr(keys, kind)
    for index, (number, row) in enumerate(_rows(path)):
        where = f"{path}:{number}"
        question = _text(row, "question", where)
        if kind == "litm":
            answers = row.get("answers")
            if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
                raise ValueError(f"graded: {where}: 'answers' must be a list of strings")
            item = Keyed(f"nq-open-{index}", tuple(answers))  # the litm experiment's item id
        elif kind == "qa":
            item = Keyed(_text(row, "id", where), (_text(row, "answer", where),))
        else:
            aliases = row.get("aliases") or []
            lures = tuple((str(d.get("text")), str(d.get("answer"))) for d in row.get("distractors") or []
                          if isinstance(d, dict))
            item = Keyed(str(row.get("id") or question), (_text(row, "answer", where), *map(str, aliases)),
                         str(row.get("doc") or ""), lures)
            paraphrase = row.get("paraphrase")
            if isinstance(paraphrase, dict) and isinstance(paraphrase.get("question"), str):
                table.setdefault(squash(paraphrase["question"]), item)  # the low-overlap question asks the same
        table.setdefault(squash(question), item)
    keys.files[kind] = str(path)


# -- recognising a prompt ----------------------------------------------------------------------------------------


def recognise(prompt: str, keys: AnswerKeys) -> Task:
    """The task a prompt asks; :class:`UnrecognisedPrompt` (one line) when it is none of the suite's."""
    for opening, reader in _OPENINGS:
        if prompt.startswith(opening):
            return reader(prompt, keys)
    asked = _LRT_ASK.search(prompt)
    if asked:
        return _lrt(prompt, int(asked.group(1)))
    if "<options>" in prompt and "<question>" in prompt:
        return _qa(prompt, keys)
    if "<Answers>" in prompt and "<Question>" in prompt:
        return _qa_source(prompt, keys)
    if prompt.startswith("Question: "):
        return _litm_qa(prompt, keys, r"^Question: (.*)\nAnswer:")
    raise UnrecognisedPrompt(f"graded: no experiment of the suite asks this prompt: {prompt[:80]!r}")


def _tail(prompt: str, pattern: str, what: str, flags: int = 0) -> re.Match[str]:
    """The prompt's closing part: ``pattern`` at its end (``.`` spans lines only with ``flags=re.S``)."""
    found = re.search(pattern + r"\s*$", prompt, flags)
    if found is None:
        raise UnrecognisedPrompt(f"graded: a {what} prompt without its question: {prompt[-80:]!r}")
    return found


def _pick(prompt: str, choices: Sequence[str]) -> str:
    return choices[int(draw("wrong", prompt) * len(choices))]


def _lrt(prompt: str, target: int) -> Task:
    def value(line: int) -> str | None:
        found = re.search(rf"^line {line}: REGISTER_CONTENT is <(-?\d+)>$", prompt, re.M)
        return found.group(1) if found else None

    right = value(target)
    if right is None:
        raise UnrecognisedPrompt(f"graded: an LRT prompt asks line {target}, which it does not hold")
    near = [v for v in (value(target - 1), value(target + 1)) if v is not None and v != right]
    if not near:  # both neighbours missing or holding the same value (the source protocol repeats values)
        lines = {int(k): v for k, v in re.findall(r"^line (\d+): REGISTER_CONTENT is <(-?\d+)>$", prompt, re.M)}
        others = sorted((abs(k - target), k) for k, v in lines.items() if v != right)
        if not others:
            raise UnrecognisedPrompt(f"graded: an LRT prompt whose every line holds {right}: no wrong answer")
        near = [lines[others[0][1]]]
    item = hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return Task("lrt", f"lrt-{item}", right, _pick(prompt, near))


def _options(block: str) -> list[tuple[str, str]]:
    """``[(letter, text)]`` of an option list: ``A. ...`` lines, or the source's ``['A. ...', ...]`` list."""
    parts: list[str]
    if block.startswith("["):
        try:
            parsed = ast.literal_eval(block)
        except (ValueError, SyntaxError):
            raise UnrecognisedPrompt(f"graded: an option list that is not a list: {block[:80]!r}") from None
        parts = [str(p) for p in parsed]
    else:
        parts = _OPTION_SPLIT.split(block)
    options = [(p[0], p[3:]) for p in parts if len(p) >= 3 and p[0] in "ABCD" and p[1:3] == ". "]
    if len(options) != len(parts) or not options:
        raise UnrecognisedPrompt(f"graded: options not in the 'A. text' form: {block[:80]!r}")
    return options


def _choice(question: str, block: str, keys: AnswerKeys) -> tuple[str, str, list[str]]:
    """``(item id, right letter, wrong letters)`` of one multiple-choice question."""
    keyed = keys.find("qa", question)
    options = _options(block)
    right = [letter for letter, text in options if squash(text) == squash(keyed.answers[0])]
    if len(right) != 1:
        raise UnrecognisedPrompt(f"graded: {keyed.id}: the key's answer is {len(right)} of the prompt's options")
    return keyed.id, right[0], [letter for letter, _ in options if letter != right[0]]


def _qa(prompt: str, keys: AnswerKeys) -> Task:
    at = prompt.rfind("<question>")  # the question asked comes after any worked example
    found = _QA_OPTIONS.match(prompt, at)
    if found is None:
        raise UnrecognisedPrompt(f"graded: a qa prompt whose last question has no options: {prompt[at:at + 80]!r}")
    item, right, wrong = _choice(found.group(1), found.group(2), keys)
    pad = "<scratchpad>\n\"The passage of the record that answers it.\"\n</scratchpad>\n" \
        if "<scratchpad></scratchpad>" in prompt else ""
    return Task("qa", item, f"{pad}<answer>{right}</answer>", f"{pad}<answer>{_pick(prompt, wrong)}</answer>")


def _last(pattern: re.Pattern[str], prompt: str, opening: str) -> str:
    """The last ``opening`` block of the prompt, read by ``pattern``."""
    found = pattern.match(prompt, max(prompt.rfind(opening), 0))
    if found is None:
        raise UnrecognisedPrompt(f"graded: a source qa prompt without a {opening} block")
    return found.group(1)


def _qa_source(prompt: str, keys: AnswerKeys) -> Task:
    question = _last(_QA_SOURCE_QUESTION, prompt, "<Question>")
    item, right, wrong = _choice(question, _last(_QA_SOURCE_ANSWERS, prompt, "<Answers>"), keys)
    if "<scratchpad></scratchpad>" in prompt:
        pad = "<scratchpad>\nThe passage of the record that answers it.\n</scratchpad>\n"
        return Task("qa", item, f"{pad}<Answer>{right}</Answer>", f"{pad}<Answer>{_pick(prompt, wrong)}</Answer>")
    return Task("qa", item, f"\n<Answer>\n{right}\n</Answer>", f"\n<Answer>\n{_pick(prompt, wrong)}\n</Answer>")


def _wrong_answer(prompt: str, kind: str, keys: AnswerKeys, golds: Sequence[str],
                  match: Callable[[str, str], bool]) -> str:
    """Another item's answer that no gold answer matches (drawn from the key, starting at a hashed place)."""
    others = keys.others(kind)
    start = int(draw("wrong", prompt) * len(others))
    for item in others[start:] + others[:start]:
        candidate = item.answers[0]
        if not any(match(candidate, g) or match(g, candidate) for g in golds):
            return candidate
    return "I don't know."


def _docs(pattern: str) -> Callable[[str, AnswerKeys], Task]:
    def read(prompt: str, keys: AnswerKeys) -> Task:
        keyed = keys.find("docs", _tail(prompt, pattern, "docs").group(1))
        lures = [answer for text, answer in keyed.distractors if text in prompt]
        return Task("docs", keyed.id, keyed.answers[0],
                    _pick(prompt, lures) if lures else _wrong_answer(prompt, "docs", keys, keyed.answers, contains))
    return read


def _docs_abstain(prompt: str, keys: AnswerKeys) -> Task:
    found = _tail(prompt, _DOCS_ABSTAIN[1], "docs")
    keyed = keys.find("docs", found.group(1))
    there = f"[Document: {keyed.doc}]" in prompt
    return Task("docs", keyed.id, keyed.answers[0] if there else found.group(2),
                _wrong_answer(prompt, "docs", keys, keyed.answers, contains))


def _judge(pattern: str, split: bool) -> Callable[[str, AnswerKeys], Task]:
    def read(prompt: str, keys: AnswerKeys) -> Task:
        found = re.search(pattern, prompt, re.S)
        if found is None:
            raise UnrecognisedPrompt(f"graded: a docs judge prompt without question, gold and answer: {prompt!r:.120}")
        gold = found.group("gold")
        golds = gold.split(" / ") if split else [gold]
        verdict = any(contains(found.group("answer"), g) for g in golds)
        return Task("docs-judge", squash(found.group("q")), json.dumps({"correct": verdict}),
                    json.dumps({"correct": not verdict}), graded=False)
    return read


def _litm_match(prediction: str, gold: str) -> bool:
    """Lost in the Middle's best_subspan_em for one gold answer: normalised gold inside the normalised prediction."""
    return normalize(gold) in normalize(prediction)


def _litm_qa(prompt: str, keys: AnswerKeys, pattern: str = _LITM_QA[1]) -> Task:
    keyed = keys.find("litm", _tail(prompt, pattern, "litm").group(1))
    return Task("litm-qa", keyed.id, keyed.answers[0],
                _wrong_answer(prompt, "litm", keys, keyed.answers, _litm_match))


def _litm_kv(prompt: str, keys: AnswerKeys) -> Task:
    found = _tail(prompt, _LITM_KV[1], "litm key-value", re.S)
    try:
        records: list[tuple[str, str]] = json.loads(found.group("records"), object_pairs_hook=list)
    except json.JSONDecodeError as exc:
        raise UnrecognisedPrompt(f"graded: a litm key-value prompt whose records are not JSON ({exc.msg})") from None
    key = found.group("key")
    at = next((i for i, (k, _) in enumerate(records) if k == key), None)
    if at is None or len(records) < 2:
        raise UnrecognisedPrompt(f"graded: a litm key-value prompt without the key it asks ({key!r}) among others")
    near = [str(records[i][1]) for i in (at - 1, at + 1) if 0 <= i < len(records)]
    return Task("litm-kv", f"kv-{key}", str(records[at][1]), _pick(prompt, near))


_OPENINGS: tuple[tuple[str, Callable[[str, AnswerKeys], Task]], ...] = (
    (_DOCS_ANSWER[0], _docs(_DOCS_ANSWER[1])),
    (_DOCS_ABSTAIN[0], _docs_abstain),
    (_DOCS_SOURCE_ANSWER[0], _docs(_DOCS_SOURCE_ANSWER[1])),
    (_JUDGE[0], _judge(_JUDGE[1], split=True)),
    (_JUDGE_SOURCE[0], _judge(_JUDGE_SOURCE[1], split=False)),
    (_LITM_QA[0], _litm_qa),
    (_LITM_KV[0], _litm_kv),
)
