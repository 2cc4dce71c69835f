"""Generated Anthropic conversations, with what a lossless conversion of each must keep.

Used by the converter's property tests and by the tests of what resumes a conversion (checkpoints,
the order guard's checked runs): every shape a client may send — interleaved text and images,
parallel tool_use / tool_result, consecutive same-role turns, orphan and missing results, system
turns, prefill, leading assistant turns.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

TOOL_NAMES = ["Bash", "Read", "mcp__server_with_a_rather_long_name__and_a_long_tool_name_to_match_it", "srv.tool"]


@dataclass
class Expected:
    texts: list[str] = field(default_factory=list)
    tool_results: list[tuple[str, list[str]]] = field(default_factory=list)
    tool_uses: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[dict[str, Any], Expected]:
    expected = Expected()
    counter = iter(range(1_000_000))

    def marker(prefix: str) -> str:
        return f"{prefix}{next(counter)}Z"

    def new_image() -> dict[str, Any]:
        data = base64.b64encode(marker("IMG").encode()).decode()  # valid base64: the converter checks it
        expected.images.append(data)
        media_type = draw(st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]))
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}

    def result_content() -> Any:
        shape = draw(st.sampled_from(["string", "blocks", "with_image", "empty", "none", "document"]))
        texts: list[str] = []
        if shape == "string":
            texts.append(marker("RES"))
            content: Any = texts[0]
        elif shape == "blocks":
            texts.extend(marker("RES") for _ in range(draw(st.integers(1, 3))))
            content = [{"type": "text", "text": value} for value in texts]
        elif shape == "with_image":
            texts.append(marker("RES"))
            content = [{"type": "text", "text": texts[0]}, new_image()]
        elif shape == "document":
            texts.append(marker("DOC"))
            content = [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": texts[0]}}]
        elif shape == "empty":
            content = [] if draw(st.booleans()) else ""
        else:
            content = None
        return content, texts

    messages: list[dict[str, Any]] = []
    open_tool_ids: list[str] = []  # tool uses of the most recent assistant message(s)
    for _ in range(draw(st.integers(1, 14))):
        role = draw(st.sampled_from(["user", "user", "assistant", "assistant", "system"]))
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if messages and messages[-1]["role"] != "assistant":
                open_tool_ids = []
            for kind in draw(st.lists(st.sampled_from(["text", "tool_use", "tool_use", "thinking"]), max_size=4)):
                if kind == "text":
                    value = marker("AST")
                    expected.texts.append(value)
                    blocks.append({"type": "text", "text": value})
                elif kind == "thinking":
                    value = marker("THK")
                    expected.texts.append(value)
                    blocks.append({"type": "thinking", "thinking": value, "signature": "sig"})
                else:
                    tool_id = marker("toolu_")
                    expected.tool_uses.append(tool_id)
                    open_tool_ids.append(tool_id)
                    tool_input = draw(
                        st.sampled_from([{}, {"command": "ls"}, {"path": None, "deep": {"x": [1, None]}}])
                    )
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": draw(st.sampled_from(TOOL_NAMES)),
                            "input": tool_input,
                        }
                    )
            if len(blocks) == 1 and blocks[0]["type"] == "text" and draw(st.booleans()):
                messages.append({"role": "assistant", "content": blocks[0]["text"]})
            else:
                messages.append({"role": "assistant", "content": blocks})
        elif role == "system":
            if draw(st.booleans()):
                value = marker("SYS")
                expected.texts.append(value)
                messages.append(
                    {"role": "system", "content": value if draw(st.booleans()) else [{"type": "text", "text": value}]}
                )
            else:
                messages.append({"role": "system", "content": draw(st.sampled_from(["", None, []]))})
        else:
            blocks = []
            answerable = list(open_tool_ids)
            for kind in draw(
                st.lists(
                    st.sampled_from(["text", "image", "burst", "result", "result", "orphan", "document"]), max_size=5
                )
            ):
                if kind == "text":
                    value = marker("USR")
                    expected.texts.append(value)
                    blocks.append({"type": "text", "text": value})
                elif kind == "image":
                    blocks.append(new_image())
                elif kind == "burst":  # enough images to pass the per-message cap now and then
                    blocks.extend(new_image() for _ in range(6))
                elif kind == "document":
                    value = marker("DOC")
                    expected.texts.append(value)
                    blocks.append(
                        {
                            "type": "document",
                            "source": {"type": "content", "content": [{"type": "text", "text": value}]},
                        }
                    )
                else:
                    if kind == "result" and answerable:
                        tool_id = draw(st.sampled_from(answerable))  # may answer twice: a duplicate
                    else:
                        tool_id = marker("orphan_")
                    content, texts = result_content()
                    expected.tool_results.append((tool_id, texts))
                    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
                    if draw(st.booleans()):
                        block["is_error"] = draw(st.booleans())
                    blocks.append(block)
            if len(blocks) == 1 and blocks[0]["type"] == "text" and draw(st.booleans()):
                messages.append({"role": "user", "content": blocks[0]["text"]})
            else:
                messages.append({"role": "user", "content": blocks})
    if not any(message["role"] != "system" or message["content"] for message in messages):
        value = marker("USR")
        expected.texts.append(value)
        messages.append({"role": "user", "content": value})

    body: dict[str, Any] = {
        "model": draw(st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-8[1m]", "gpt-4"])),
        "max_tokens": 100,
        "messages": messages,
    }
    if draw(st.booleans()):
        value = marker("PROMPT")
        expected.texts.append(value)
        body["system"] = [{"type": "text", "text": value, "cache_control": {"type": "ephemeral"}}]
    offered = draw(st.lists(st.sampled_from(TOOL_NAMES), unique=True))
    if offered:
        body["tools"] = [
            {"name": name, "description": "", "input_schema": {"type": "object", "properties": {}}} for name in offered
        ]
    if draw(st.booleans()):
        body["tool_choice"] = {"type": draw(st.sampled_from(["auto", "any", "none"]))}
    if draw(st.booleans()):
        body["thinking"] = draw(
            st.sampled_from([{"type": "adaptive"}, {"type": "enabled", "budget_tokens": 2048}, {"type": "disabled"}])
        )
    return body, expected
