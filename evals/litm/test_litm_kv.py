"""Lost in the Middle (Liu et al., 2023; TACL 2024), key-value retrieval (``litm-kv``): does accuracy depend on
where the key sits?

A JSON object of ``keys`` random UUID pairs with the key to look up at index ``key_position``. The paper's prompt,
greedy decoding, 100 new tokens; an answer is right when it contains the value. Trial *i* of every cell asks the
same row (paired). See pytest_longctx/experiments/litm/; multi-document QA is in test_litm_qa.py.
"""

from __future__ import annotations

import pytest

from pytest_longctx import Trial
from pytest_longctx.experiments.litm.contexts import kv_records
from pytest_longctx.experiments.litm.data import KvRow, sample_order
from pytest_longctx.experiments.litm.metric import kv_correct
from pytest_longctx.experiments.litm.prompts import check_fits, kv_request


@pytest.mark.longctx("litm-kv")
async def test_litm_kv(longctx: Trial, litm_kv_rows: dict[int, list[KvRow]], keys: int, key_position: int) -> None:
    rows = litm_kv_rows[keys]
    if longctx.sample >= len(rows):
        pytest.skip(f"the {keys}-key file has {len(rows)} rows; trial {longctx.sample} would repeat one")
    row = rows[sample_order(len(rows), longctx.run_seed, f"kv-{keys}")[longctx.sample]]
    records = kv_records(row, key_position)
    request = kv_request(records, row.key)
    longctx.record(item=f"kv-{keys}-{row.index}", template=request.template)
    tokens = check_fits(longctx, request, "--longctx-litm-keys")
    neighbours = tuple(v for k, v in records[max(key_position - 1, 0):key_position + 2] if k != row.key)
    longctx.expect(row.value, wrong=neighbours)
    answer = await longctx.ask(request)
    longctx.record(answer=answer.strip(), key=row.key, context_tokens=tokens)
    assert kv_correct(row.value, answer), f"value {row.value} not in the answer"
