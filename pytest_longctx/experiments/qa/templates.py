"""The qa experiment's prompts (longctx protocol). Change a template's text → bump its version (cache keys use both).

Rendered prompts for fixed seeds are snapshot-tested (tests/__snapshots__), so any change here
shows up as a reviewed diff.
"""

from __future__ import annotations

from pytest_longctx.templates import Template

MCQA = Template("mcqa", 1, """\
Here are some documents from the Federal Register:
<documents>
{context}
</documents>
{examples}
{instructions}

<question>{question}</question>
<options>
{options}
</options>""")

# No instruction names an example letter: "e.g. <answer>C</answer>" (version 1) biased small models towards C.
MCQA_PLAIN_INSTRUCTIONS = Template("mcqa-plain", 2, """\
Answer the multiple-choice question below using the documents. Reply with the letter (A, B, C or D) \
of the correct option inside <answer></answer> tags, and nothing else.""")

MCQA_SCRATCHPAD_INSTRUCTIONS = Template("mcqa-scratchpad", 2, """\
Answer the multiple-choice question below using the documents. First, find the 2-3 quotes from \
the documents that are most relevant to the question and copy them word for word inside \
<scratchpad></scratchpad> tags. Then reply with the letter (A, B, C or D) of the correct option \
inside <answer></answer> tags.""")

MCQA_EXAMPLES = Template("mcqa-examples", 1, """
Here are example questions with their correct answers:
{examples}
""")

MCQA_EXAMPLE = Template("mcqa-example", 1, """\
<example>
<question>{question}</question>
<options>
{options}
</options>
{scratchpad}<answer>{letter}</answer>
</example>""")

ALL: tuple[Template, ...] = (MCQA, MCQA_PLAIN_INSTRUCTIONS, MCQA_SCRATCHPAD_INSTRUCTIONS, MCQA_EXAMPLES,
                             MCQA_EXAMPLE)
TEMPLATES: dict[str, Template] = {t.id: t for t in ALL}


def get(template_id: str) -> Template:
    return TEMPLATES[template_id]
