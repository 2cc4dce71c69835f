"""The official `openai` SDK pointed at the gateway, and the checks its answers need.

async with open_gateway(tmp_path) as gw, openai_client(gw) as client:
    gw.sim.enqueue(scripts.text_reply("Hello"))
    completion = await client.chat.completions.create(model=MODEL, messages=[user("hi")])
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import openai

from q2api.testing import scripts
from tests.support.gateway_harness import CLIENT_KEY, MODEL, Gateway

# A 1×1 PNG: the smallest image every client accepts.
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


async def stream_chunks(client: openai.AsyncOpenAI, **request) -> list:
    stream = await client.chat.completions.create(model=MODEL, stream=True, **request)
    return [chunk async for chunk in stream]


def streamed_text(chunks: list) -> str:
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


@contextlib.asynccontextmanager
async def openai_client(gw: Gateway, *, api_key: str = CLIENT_KEY) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key=api_key, max_retries=0, timeout=20)
    async with client:
        yield client


def assert_openai_envelope(body: Any) -> dict[str, Any]:
    """The SDK hands `error` of the envelope to the exception as `body`; all four keys are there."""
    assert isinstance(body, dict), body
    assert set(body) == {"message", "type", "param", "code"}, body
    assert isinstance(body["message"], str) and body["message"], body
    assert "Traceback" not in body["message"]
    return body


def tool_calls_reply(*calls: tuple[str, str, dict[str, Any]], text_before: str | None = None) -> scripts.StreamReply:
    """Amazon Q answering with several tool calls in one reply: (tool use id, name, input) each."""
    parts: list[Any] = [scripts.conversation_event()]
    if text_before:
        parts.append(scripts.text_events(text_before))
    for tool_use_id, name, tool_input in calls:
        parts.append(scripts.tool_use_events(tool_use_id, name, tool_input))
    parts.append(scripts.usage_event(30, 15))
    return scripts.stream(*parts)
