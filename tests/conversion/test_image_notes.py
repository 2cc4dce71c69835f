"""Tool-result images: the notes tell the model which images are attached and which were not sent."""

from __future__ import annotations

from tests.support.converter_helpers import (
    assistant,
    convert,
    current,
    image,
    tagged,
    text,
    tool_result,
    tool_use,
    user,
)


def screenshots(tool_id, first, count):
    return tool_result(
        tool_id, [text(f"{count} screenshots"), *(image(tagged(f"img{n}")) for n in range(first, first + count))]
    )


def result_texts(conversion):
    results = current(conversion)["userInputMessageContext"]["toolResults"]
    return {result["toolUseId"]: [part["text"] for part in result["content"]] for result in results}


def test_twelve_tool_result_images_ten_sent_and_the_notes_say_which():
    conversion = convert(
        [
            user("take screenshots"),
            assistant([tool_use("t1", "Screenshot"), tool_use("t2", "Screenshot")]),
            user([screenshots("t1", 0, 6), screenshots("t2", 6, 6)]),
        ]
    )
    sent = [entry["source"]["bytes"] for entry in current(conversion)["images"]]
    assert sent == [tagged(f"img{n}") for n in range(2, 12)]
    notes = result_texts(conversion)
    assert notes["t1"][-1] == (
        "[This tool result returned 6 images: images 3–6 of them attached to this message as attachments 1–4; "
        "images 1–2 not sent: Amazon Q takes at most 10 images per message and the 10 most recent were sent]"
    )
    assert notes["t2"][-1] == "[This tool result returned 6 images, attached to this message as attachments 5–10]"
    dropped = [finding for finding in conversion.report if finding.kind == "image_dropped"]
    assert [finding.detail.split(":")[0] for finding in dropped] == [
        "messages.2.content.0.content.1",
        "messages.2.content.0.content.2",
    ]


def test_a_tool_result_whose_images_were_all_dropped_says_none_was_sent():
    conversion = convert(
        [
            user("go"),
            assistant([tool_use("t1", "Screenshot")]),
            user([screenshots("t1", 0, 2), *(image(tagged(f"user{n}")) for n in range(10))]),
        ]
    )
    assert result_texts(conversion)["t1"][-1] == (
        "[This tool result returned 2 images; none was sent: "
        "Amazon Q takes at most 10 images per message and the 10 most recent were sent]"
    )


def test_an_orphan_results_images_are_described_in_its_text():
    conversion = convert([user("go"), assistant("ok"), user([screenshots("gone", 0, 1), text("and?")])])
    content = current(conversion)["content"]
    assert "[Result of an earlier tool call gone (success)" in content
    assert "[This tool result returned 1 image, attached to this message as attachment 1]" in content
    assert len(current(conversion)["images"]) == 1
