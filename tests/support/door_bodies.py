"""One fuzzer per door: seeded, fast generators of hostile requests, and the judge of each answer.

    fuzzer = DOOR_FUZZERS["responses"]
    for index in range(n):
        request = fuzzer.request(seed, index)      # FuzzRequest(method, path, body, headers)
        ...
        problem = fuzzer.problem(status, answer)   # None, or what is wrong

A request is a function of (seed, index) alone, so a failure of a long run is replayed from the
two numbers it prints. Bodies are each door's own shape (tests/support/hostile_values.py supplies
the hostile values): deep nesting in every field that holds JSON (tool inputs, tool-call
`arguments` strings, schemas, metadata), odd UTF-8, huge numbers, wrong types anywhere, unknown
block, item and tool types, fields missing or unknown; a few are then damaged on the way (cut,
invalid UTF-8, a BOM, buried) or plain bytes. Every answer must be 2xx or 4xx in the door's
envelope: Anthropic's on `/v1/messages`, OpenAI's on the OpenAI doors, `{"error": {type,
message}}` on the admin API.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.admin_bodies import admin, admin_problem
from tests.support.fuzz_bodies import problem_with as anthropic_problem
from tests.support.fuzz_chat_bodies import chat_problem_with as openai_problem
from tests.support.fuzz_request import FuzzRequest, finish
from tests.support.hostile_values import Hostile

MODELS = ("claude-sonnet-5-5", "claude-haiku-5-5", "gpt-4o", "gpt-5-codex")
IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@dataclass(frozen=True)
class DoorFuzzer:
    name: str
    draw: Callable[[Hostile], FuzzRequest]
    problem: Callable[[int, bytes], str | None]

    def request(self, seed: int, index: int) -> FuzzRequest:
        return self.draw(Hostile(random.Random(f"{self.name}:{seed}:{index}")))


# ---------------------------------------------------------------- /v1/messages


def _claude_block(h: Hostile, role: str) -> Any:
    kind = h.rng.randrange(10 if h.tame else 12)
    if kind == 0:
        return h.fields(
            {"type": "text", "text": h.text()}, {"cache_control": {"type": "ephemeral"}, "citations": h.value()}
        )
    if kind == 1:
        source = h.pick(
            (
                {
                    "type": "base64",
                    "media_type": h.pick(("image/png", "image/gif", "text/plain")),
                    "data": h.pick((IMAGE, "!!", h.text())),
                },
                {"type": "url", "url": h.pick(("http://169.254.169.254/", "file:///etc/passwd", h.text()))},
                {"type": "nope"},
            )
        )
        return h.fields(
            {"type": h.pick(("image", "document")), "source": source}, {"title": h.text(), "context": h.text()}
        )
    if kind in (2, 3):
        return h.fields(
            {
                "type": "tool_use",
                "id": h.pick(("toolu_1", "toolu_2", h.text())),
                "name": h.pick(("Read", "x" * 80, h.text())),
                "input": h.document(),
            },
            {"cache_control": {"type": "ephemeral"}},
        )
    if kind in (4, 5):
        content = h.pick(
            (
                h.text(),
                [{"type": "text", "text": h.text()}],
                [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE}}],
                [h.value()],
                h.value(),
            )
        )
        return h.fields(
            {"type": "tool_result", "tool_use_id": h.pick(("toolu_1", "toolu_2", h.text())), "content": content},
            {"is_error": h.wrong()},
        )
    if kind == 6:
        return h.fields({"type": "thinking", "thinking": h.text(), "signature": h.text()}, {})
    if kind == 7:
        return h.fields({"type": "redacted_thinking", "data": h.text()}, {})
    if kind == 8:
        return h.fields({"type": "server_tool_use", "id": h.text(), "name": "web_search", "input": h.document()}, {})
    if kind == 9:
        return h.fields({"type": "web_search_tool_result", "tool_use_id": h.text(), "content": h.value()}, {})
    if kind == 10:
        return {
            "type": h.pick(("nope", "container_upload", "mcp_tool_use", "compaction", "search_result", h.text())),
            "x": h.value(),
        }
    return h.value()


def _claude_tool(h: Hostile) -> Any:
    if h.chance(0.8):
        return h.fields(
            {"name": h.pick(("get_weather", "x" * 80, h.text())), "input_schema": h.schema()},
            {
                "description": h.pick((h.text(), "d" * 20000)),
                "type": "custom",
                "strict": h.wrong(),
                "cache_control": {"type": "ephemeral"},
            },
        )
    return h.fields(
        {
            "type": h.pick(("web_search_20250305", "bash_20250124", "code_execution_20250825", "nope", h.text())),
            "name": h.text(),
        },
        {"max_uses": h.number()},
    )


def claude_messages(h: Hostile) -> FuzzRequest:
    messages = [
        h.fields(
            {
                "role": h.either(h.pick(("user", "assistant", "user", "assistant", "system")), "nope"),
                "content": h.pick((h.text(), [_claude_block(h, "user") for _ in range(h.rng.randrange(4))])),
            },
            {},
        )
        for _ in range(h.rng.randrange(1, 5))
    ]
    document = h.fields(
        {"model": h.pick((*MODELS, h.text())), "max_tokens": h.pick((64, 1, h.number())), "messages": messages},
        {
            "system": h.pick((h.text(), [{"type": "text", "text": h.text()}], h.value())),
            "tools": [_claude_tool(h) for _ in range(h.rng.randrange(4))],
            "tool_choice": h.pick(({"type": "auto"}, {"type": "tool", "name": h.text()}, {"type": "nope"})),
            "metadata": h.pick(({"user_id": h.text()}, h.document())),
            "thinking": h.pick(
                ({"type": "enabled", "budget_tokens": h.number()}, {"type": "adaptive"}, {"type": "nope"})
            ),
            "temperature": h.number(),
            "top_k": h.number(),
            "top_p": h.number(),
            "stop_sequences": [h.text() for _ in range(h.rng.randrange(3))],
            "stream": h.chance(0.3),
            "output_config": h.pick(
                ({"effort": "high"}, {"format": {"type": "json_schema", "schema": h.schema()}}, h.value())
            ),
            "context_management": h.value(),
        },
    )
    path = "/v1/messages/count_tokens" if h.chance(0.1) else "/v1/messages"
    return finish(h, path, document)


# ---------------------------------------------------------------- /v1/chat/completions


def _chat_arguments(h: Hostile) -> Any:
    return h.pick(
        (
            h.deep_text(),
            h.encode(h.document()).decode("utf-8", "replace"),
            h.text(),
            "{",
            '{"a": 1e400}',
            '{"a": 18446744073709551616}',
        )
    )


def _chat_message(h: Hostile) -> Any:
    role = h.either(
        h.pick(("system", "developer", "user", "assistant", "tool", "user", "assistant")), h.pick(("function", "nope"))
    )
    content = h.pick(
        (
            h.text(),
            h.either(h.text(), None, 0.5) if role != "assistant" else None,
            [
                h.pick(
                    (
                        {"type": "text", "text": h.text()},
                        {
                            "type": "image_url",
                            "image_url": {
                                "url": h.pick(
                                    (f"data:image/png;base64,{IMAGE}", "data:,", "http://169.254.169.254/", h.text())
                                )
                            },
                        },
                        h.either(
                            {"type": "text", "text": h.text()}, {"type": "file", "file": {"file_data": h.text()}}, 0.3
                        ),
                        h.either(
                            {"type": "text", "text": h.text()}, {"type": "input_audio", "input_audio": h.value()}, 0.3
                        ),
                        h.either({"type": "text", "text": h.text()}, {"type": h.text()}, 0.5),
                    )
                )
                for _ in range(h.rng.randrange(3))
            ],
        )
    )
    calls = [
        h.fields(
            {
                "id": h.pick(("call_1", h.text())),
                "type": "function",
                "function": h.fields({"name": h.pick(("f", h.text())), "arguments": _chat_arguments(h)}, {}),
            },
            {},
        )
        for _ in range(h.rng.randrange(3))
    ]
    return h.fields(
        {"role": role, "content": content},
        {"tool_calls": calls, "tool_call_id": h.pick(("call_1", h.text())), "name": h.text()},
        keep=0.5,
    )


def chat_completions(h: Hostile) -> FuzzRequest:
    document = h.fields(
        {
            "model": h.either(h.pick(MODELS), h.text()),
            "messages": [_chat_message(h) for _ in range(h.rng.randrange(1, 5))],
        },
        {
            "max_tokens": h.number(),
            "max_completion_tokens": h.number(),
            "n": h.number(),
            "temperature": h.either(0.5, h.number(), 0.5),
            "stream": h.chance(0.3),
            "stream_options": {"include_usage": h.either(True, h.wrong(), 0.5)},
            "stop": h.pick((h.text(), [h.text()])),
            "tools": [
                h.fields(
                    {
                        "type": h.either("function", "nope"),
                        "function": h.fields(
                            {"name": h.text()}, {"parameters": h.schema(), "strict": h.wrong(), "description": h.text()}
                        ),
                    },
                    {},
                )
                for _ in range(h.rng.randrange(3))
            ],
            "tool_choice": h.either(
                h.pick(("auto", "required", {"type": "function", "function": {"name": h.text()}})), "nope"
            ),
            "response_format": h.pick(
                (
                    {"type": "json_object"},
                    {
                        "type": "json_schema",
                        "json_schema": h.fields({"name": h.text(), "schema": h.schema()}, {"strict": True}),
                    },
                    {"type": "nope"},
                )
            ),
            "metadata": h.document(),
            "reasoning_effort": h.either(h.pick(("low", "high")), "nope"),
            "logit_bias": h.document(),
            "seed": h.number(),
            "user": h.text(),
        },
    )
    return finish(h, "/v1/chat/completions", document)


# ---------------------------------------------------------------- /v1/responses


def _responses_item(h: Hostile) -> Any:
    kind = h.rng.randrange(8 if h.tame else 10)
    call_id = h.pick(("call_1", "call_2", h.text()))
    if kind in (0, 1):
        parts = [
            h.pick(
                (
                    {"type": "input_text", "text": h.text()},
                    {"type": "output_text", "text": h.text(), "annotations": [h.value()]},
                    {
                        "type": "input_image",
                        "image_url": h.pick((f"data:image/png;base64,{IMAGE}", "http://169.254.169.254/", h.text())),
                    },
                    {"type": "input_file", "file_data": h.text(), "filename": h.text()},
                    {"type": "refusal", "refusal": h.text()},
                    {"type": h.text()},
                )
            )
            for _ in range(h.rng.randrange(3))
        ]
        return h.fields(
            {
                "type": "message",
                "role": h.either(h.pick(("user", "assistant", "system", "developer")), "nope"),
                "content": h.pick((h.text(), parts)),
            },
            {"id": h.text(), "phase": h.text()},
        )
    if kind in (2, 3):
        return h.fields(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": h.pick(("f", h.text())),
                "arguments": _chat_arguments(h),
            },
            {"namespace": h.text(), "id": h.text()},
        )
    if kind == 4:
        return h.fields(
            {
                "type": "function_call_output",
                "call_id": call_id,
                "output": h.pick((h.text(), [{"type": "input_text", "text": h.text()}], h.value())),
            },
            {},
        )
    if kind == 5:
        return h.fields({"type": "custom_tool_call", "call_id": call_id, "name": h.text(), "input": h.text()}, {})
    if kind == 6:
        return h.fields(
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": h.text()}]},
            {"encrypted_content": h.text(), "content": h.value()},
        )
    if kind == 7:
        return h.fields({"type": "web_search_call", "action": h.document()}, {"status": h.text()})
    if kind == 8:
        return {"type": h.pick(("item_reference", "computer_call", "nope", h.text())), "id": h.text(), "x": h.value()}
    return h.value()


def _responses_tool(h: Hostile) -> Any:
    kind = h.rng.randrange(5)
    if kind < 2:
        return h.fields(
            {"type": "function", "name": h.pick(("f", h.text())), "parameters": h.schema()},
            {"strict": h.wrong(), "description": h.pick((h.text(), "d" * 20000))},
        )
    if kind == 2:
        return h.fields(
            {"type": "custom", "name": h.text()},
            {
                "format": h.pick(
                    (
                        {"type": "grammar", "syntax": "regex", "definition": h.pick(("^(a+)+$", "[", h.text()))},
                        {"type": "text"},
                        h.value(),
                    )
                )
            },
        )
    if kind == 3:
        return h.fields({"type": "namespace", "name": h.text(), "tools": [h.value()]}, {})
    return {
        "type": h.pick(("web_search", "web_search_preview", "file_search", "computer_use_preview", "nope", h.text())),
        "x": h.value(),
    }


def responses(h: Hostile) -> FuzzRequest:
    document = h.fields(
        {
            "model": h.either(h.pick(MODELS), h.text()),
            "input": h.pick((h.text(), [_responses_item(h) for _ in range(h.rng.randrange(1, 5))])),
        },
        {
            "instructions": h.text(),
            "tools": [_responses_tool(h) for _ in range(h.rng.randrange(3))],
            "tool_choice": h.pick(("auto", "required", {"type": "function", "name": h.text()}, h.value())),
            "max_output_tokens": h.number(),
            "temperature": h.number(),
            "text": h.pick(
                (
                    {"format": {"type": "json_schema", "name": "x", "schema": h.schema()}},
                    {"format": {"type": "json_object"}},
                    h.value(),
                )
            ),
            "reasoning": h.pick(({"effort": "high", "summary": "auto"}, h.value())),
            "metadata": h.pick(({h.text(): h.text()}, h.document())),
            "store": h.wrong() if h.chance(0.2) else h.chance(0.5),
            "stream": h.chance(0.3),
            "previous_response_id": h.either(None, h.pick(("resp_nope", h.text())), 0.3),
            "truncation": h.pick(("auto", "nope")),
            "include": [h.text()],
            "prompt_cache_key": h.text(),
            "conversation": h.value(),
            "context_management": h.value(),
        },
    )
    return finish(h, "/v1/responses", document)


DOOR_FUZZERS = {
    "messages": DoorFuzzer("messages", claude_messages, anthropic_problem),
    "chat": DoorFuzzer("chat", chat_completions, openai_problem),
    "responses": DoorFuzzer("responses", responses, openai_problem),
    "admin": DoorFuzzer("admin", admin, admin_problem),
}
