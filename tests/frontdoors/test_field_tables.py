"""Every request field of the installed SDKs is in its door's field table (q2api.frontdoors.field_table).

A field in none of the four classes (honoured, emulated, ignored, refused) fails here: the next
SDK release tells us what it added before a client finds out.
"""

from __future__ import annotations

from typing import Any

import anthropic.types
import anthropic.types.beta
import openai.types.chat
import openai.types.responses
import pytest

from q2api.frontdoors.chat.fields import CHAT_FIELDS
from q2api.frontdoors.claude.fields import CLAUDE_FIELDS
from q2api.frontdoors.field_table import FieldTable, Treatment
from q2api.frontdoors.responses.fields import RESPONSES_FIELDS
from tests.support.sdk_shapes import sdk_fields

CLAUDE_ROOTS = (
    anthropic.types.MessageCreateParams,
    anthropic.types.MessageCountTokensParams,
    anthropic.types.beta.MessageCreateParams,
    anthropic.types.beta.MessageCountTokensParams,
)


def unclassified(table: FieldTable, roots: tuple[Any, ...]) -> list[str]:
    def descend_shape(shape: str) -> bool:
        known = table.shape(shape)
        return known is None or known.rule is None

    def descend_field(shape: str, field: str) -> bool:
        rule = table.rule(shape, field)
        return rule is None or rule.treatment in (Treatment.HONOURED, Treatment.EMULATED)

    missing = []
    for root in roots:
        for shape, field in sdk_fields(root, descend_shape=descend_shape, descend_field=descend_field):
            if table.shape(shape) is None:
                missing.append(f"{shape} (the whole shape)")
            elif field and table.rule(shape, field) is None:
                missing.append(f"{shape}.{field}")
    return sorted(set(missing))


CHAT_ROOTS = (openai.types.chat.CompletionCreateParams,)
RESPONSES_ROOTS = (openai.types.responses.ResponseCreateParams,)


@pytest.mark.parametrize(
    ("table", "roots"),
    [(CLAUDE_FIELDS, CLAUDE_ROOTS), (CHAT_FIELDS, CHAT_ROOTS), (RESPONSES_FIELDS, RESPONSES_ROOTS)],
    ids=["claude", "chat", "responses"],
)
def test_every_sdk_field_is_classified(table: FieldTable, roots: tuple[Any, ...]) -> None:
    assert unclassified(table, roots) == []
