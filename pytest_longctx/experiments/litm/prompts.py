"""The paper's prompts, word for word, each with an id and a version.

Source: nelson-liu/lost-in-the-middle (MIT) at commit 29b8a6d042ce29abccee3db1a73171a107d7e6af; the three
template files were added in 76bdbb9e4f6e4f8edbedceb692b80bddca541a2d and are unchanged since. As in the
source's ``prompting.py``, a template's trailing newlines are stripped before it is filled, documents are
``Document [i](Title: t) text`` lines (1-based), and the key-value records form one JSON object, one
record per line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_longctx import Request, Trial

#: The paper's generation budget (``--max-new-tokens 100`` in EXPERIMENTS.md); greedy decoding.
MAX_TOKENS = 100


@dataclass(frozen=True)
class Template:
    """A prompt template with its id@version and where it comes from."""

    id: str
    text: str
    source: str

    def fill(self, **values: str) -> str:
        return self.text.rstrip("\n").format(**values)


#: src/lost_in_the_middle/prompts/qa.prompt @ 29b8a6d
QA = Template(
    "litm-qa@1",
    "Write a high-quality answer for the given question using only the provided search results (some of which "
    "might be irrelevant).\n\n{search_results}\n\nQuestion: {question}\nAnswer:",
    "src/lost_in_the_middle/prompts/qa.prompt @ 29b8a6d",
)
#: src/lost_in_the_middle/prompts/closedbook_qa.prompt @ 29b8a6d
CLOSEDBOOK = Template(
    "litm-closedbook@1",
    "Question: {question}\nAnswer:\n",
    "src/lost_in_the_middle/prompts/closedbook_qa.prompt @ 29b8a6d",
)
#: src/lost_in_the_middle/prompts/kv_retrieval.prompt @ 29b8a6d
KV = Template(
    "litm-kv@1",
    "Extract the value corresponding to the specified key in the JSON object below.\n\nJSON data:\n"
    "{formatted_kv_records}\n\nKey: \"{key}\"\nCorresponding value:\n",
    "src/lost_in_the_middle/prompts/kv_retrieval.prompt @ 29b8a6d",
)
TEMPLATES = (QA, CLOSEDBOOK, KV)


def format_documents(documents: Sequence[tuple[str, str]]) -> str:
    """``(title, text)`` pairs as the paper's numbered search results."""
    return "\n".join(f"Document [{i}](Title: {title}) {text}" for i, (title, text) in enumerate(documents, 1))


def format_kv_records(records: Sequence[tuple[str, str]]) -> str:
    """Key-value pairs as the paper's JSON object: ``{"k": "v",`` newline `` "k": "v",`` ... ``"k": "v"}``."""
    last = len(records) - 1
    return "".join(("{" if i == 0 else " ") + f'"{key}": "{value}"' + ("}" if i == last else ",\n")
                   for i, (key, value) in enumerate(records))


def qa_request(question: str, documents: Sequence[tuple[str, str]]) -> Request:
    """The multi-document QA prompt; no documents gives the closed-book prompt."""
    if not documents:
        return Request.user(CLOSEDBOOK.fill(question=question), max_tokens=MAX_TOKENS, template=CLOSEDBOOK.id)
    text = QA.fill(question=question, search_results=format_documents(documents))
    return Request.user(text, max_tokens=MAX_TOKENS, template=QA.id)


def kv_request(records: Sequence[tuple[str, str]], key: str) -> Request:
    """The key-value retrieval prompt."""
    text = KV.fill(formatted_kv_records=format_kv_records(records), key=key)
    return Request.user(text, max_tokens=MAX_TOKENS, template=KV.id)


class PromptTooLong(ValueError):
    """A prompt that does not fit the model's window: the trial is an error (never sent, never a wrong answer)."""


def check_fits(trial: Trial, request: Request, option: str) -> int:
    """The prompt's tokens under the model's tokenizer; raises PromptTooLong (one line) beyond the window."""
    tokens = trial.count_tokens(request.messages[0].content)
    if tokens + request.max_tokens > trial.context_window:
        raise PromptTooLong(f"{trial.experiment} {trial.params}: the prompt is {tokens:,} tokens + "
                            f"{request.max_tokens} to answer, over the model's {trial.context_window:,}-token window; "
                            f"choose smaller cells with {option}")
    return tokens
