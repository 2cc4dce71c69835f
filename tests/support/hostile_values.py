"""Hostile JSON, drawn fast from a seeded `random.Random`: the raw material of the door fuzzers.

hypothesis draws a body in ~10 ms; a run of 100,000 bodies per door needs one in well under a
millisecond, and the same seed must give the same bodies (a failure is replayed by its seed and
index). So the door fuzzers (tests/support/door_bodies.py) draw from `Hostile`:

* `value()` — any JSON value, sometimes nested past every limit (a placeholder that `encode` turns
  into 100–1,500 levels of brackets: the encoders of the standard library would overflow building it);
* `text()` — NUL, escapes, line separators, a BOM, lone surrogates (written escaped, or as the
  raw bytes of CESU-8), very long strings;
* `number()` — the edges of every integer width (2**63, 2**64 and past), negatives, floats
  written as `1e400`, `-1e400`, `1e-400` (raw: no encoder writes them);
* `wrong()` — a value of any type, for a field that wants another;
* `encode(document)` — the bytes, and `damage(body)` — the bytes cut, with invalid or overlong
  UTF-8 spliced in, a BOM in front, buried under brackets, raw control bytes inside strings.
"""

from __future__ import annotations

import json
import random
from typing import Any

_TEXTS = (
    "",
    "hi",
    "claude-sonnet-5-5\nFORGED | CRITICAL | line",
    "a\r\nb",
    "nul\x00byte",
    "esc\x1b[31mred\x1b]0;title\x07",
    "del\x7f c1\x85 ls\u2028 ps\u2029",
    "\ufeffbom",
    'quote" backslash\\ {"a": 1}',
    "%0A%0D%00",
    "日本語 naïve 🙂 \U0010ffff",
    "lone \ud800 surrogate",
    "low \udfff first",
    "pair \ud83d\ude00",
    "{{template}} ${x} $(rm -rf /)",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "x" * 5000,
)
# Integers at and past every width: orjson writes -2**63 … 2**64-1, SQL columns are often 32 or 64 bits.
_INTEGERS = (
    0,
    1,
    -1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    -(2**64),
    10**30,
    -(10**30),
    10**400,
)
# Numbers no encoder writes: spliced into the bytes by `encode`.
_RAW_NUMBERS = ("1e400", "-1e400", "1e-400", "-0", "1E+999", "0.0000000000000000000000001", "123456789e-999")
_RAW_MARK = "\x00RAW{}\x00"


class Hostile:
    """Hostile JSON values from one seeded generator (see the module docstring)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        # One body in two is tame: hostile values only where free-form JSON and text go, every field
        # of the right type, so that it gets past the parsers into conversion, upstream and reply.
        self.tame = rng.random() < 0.5
        self._raw: list[str] = []  # what the placeholders of the current document stand for

    def chance(self, probability: float) -> bool:
        return self.rng.random() < probability

    def pick(self, choices: Any) -> Any:
        return choices[self.rng.randrange(len(choices))]

    # ------------------------------------------------------------ values

    def raw(self, text: str) -> str:
        """A placeholder that `encode` replaces with `text`, as it is (not a JSON string)."""
        self._raw.append(text)
        return _RAW_MARK.format(len(self._raw) - 1)

    def text(self) -> str:
        if self.chance(0.3):
            return "".join(chr(self.rng.randrange(0x110000)) for _ in range(self.rng.randrange(1, 8)))
        text = str(self.pick(_TEXTS))
        if self.tame and ("lone" in text or "low" in text):  # valid JSON escapes no parser takes
            return "tame"
        return text

    def number(self) -> Any:
        roll = self.rng.random()
        if self.tame and roll < 0.9:
            return self.rng.randrange(1, 4096)
        if roll < 0.5:
            return self.pick(_INTEGERS)
        if roll < 0.7:
            return self.pick((0.5, -0.0, 1e308, -1e308, 5e-324, 1.5, -2.5))
        return self.raw(self.pick(_RAW_NUMBERS))

    def scalar(self) -> Any:
        return self.pick((None, True, False, self.number(), self.text(), self.rng.randrange(-5, 200)))

    def deep(self, low: int = 100, high: int = 1500) -> Any:
        """A document nested `low`..`high` levels deep (objects, arrays or both), as a placeholder."""
        depth = self.rng.randrange(low, high)
        kind = self.rng.randrange(3)
        opening, closing = [('{"a":', "}"), ("[", "]"), ('[{"a":', "}]")][kind]
        return self.raw(opening * depth + json.dumps(self.scalar_plain()) + closing * depth)

    def deep_text(self, low: int = 100, high: int = 1500) -> str:
        """A JSON text nested that deep, as a string (a tool call's `arguments`)."""
        depth = self.rng.randrange(low, high)
        return '{"a":' * depth + "1" + "}" * depth

    def scalar_plain(self) -> Any:
        return self.pick((None, True, 1, -1, 0.5, "s", 2**64, -(2**63) - 1))

    def value(self, depth: int = 0) -> Any:
        """Any JSON value: mostly small, some deep, some huge."""
        roll = self.rng.random()
        if roll < (0.01 if self.tame else 0.06):
            return self.deep()
        if roll < 0.55 or depth > 3:
            return self.scalar()
        if roll < 0.75:
            return [self.value(depth + 1) for _ in range(self.rng.randrange(4))]
        return {self.text(): self.value(depth + 1) for _ in range(self.rng.randrange(4))}

    def wrong(self) -> Any:
        """A value of any type, for a field that wants another."""
        return self.pick((None, True, 0, -1, 2**64, "", "nope", [], [None], {}, {"type": "nope"}, self.value()))

    def document(self) -> Any:
        """A free-form JSON object (a tool input, metadata), hostile inside."""
        if self.chance(0.02 if self.tame else 0.15):
            return self.deep()
        return {self.text(): self.value(1) for _ in range(self.rng.randrange(4))}

    def schema(self) -> Any:
        """A JSON schema as a tool's parameters: sometimes sound, sometimes anything."""
        if self.chance(0.2) and not self.tame:
            return self.value()
        schema: dict[str, Any] = {"type": self.either("object", self.pick(("string", "nope", None)))}
        if self.chance(0.8):
            schema["properties"] = {
                self.text(): self.pick(
                    (
                        {"type": "integer", "maximum": self.number(), "minimum": self.number()},
                        {"type": "string", "pattern": self.pick(("^(a+)+$", "[", "\\d+", "(?=x)"))},
                        {"$ref": self.pick(("#", "#/$defs/x", "http://127.0.0.1:9/s.json", "file:///etc/passwd"))},
                        {"enum": [self.scalar() for _ in range(3)]},
                        self.value(),
                    )
                )
                for _ in range(self.rng.randrange(3))
            }
        if self.chance(0.3):
            schema["required"] = self.pick((None, [self.text()], "a", [1]))
        if self.chance(0.02 if self.tame else 0.1):
            schema["properties"] = self.deep()
        if self.chance(0.2):
            schema[self.text()] = self.value()
        return schema

    # ------------------------------------------------------------ shaping a document

    def maybe(self, value: Any, wrong: float = 0.04) -> Any:
        """`value`, or now and then a wrong one in its place."""
        return self.wrong() if not self.tame and self.chance(wrong) else value

    def either(self, good: Any, odd: Any, odds: float = 0.15) -> Any:
        """`good`, or now and then (never when tame) `odd`: an unknown type, role or model."""
        return odd if not self.tame and self.chance(odds) else good

    def fields(self, required: dict[str, Any], optional: dict[str, Any], keep: float = 0.35) -> dict[str, Any]:
        """An object: `required` (each sometimes missing or wrong), some of `optional`, sometimes a field
        nobody declares."""
        missing = 0.0 if self.tame else 0.03
        document = {name: self.maybe(value) for name, value in required.items() if not self.chance(missing)}
        document.update({name: self.maybe(value) for name, value in optional.items() if self.chance(keep)})
        if not self.tame and self.chance(0.05):
            document[self.text()] = self.value()
        return document

    # ------------------------------------------------------------ bytes

    def encode(self, document: Any) -> bytes:
        """The document's bytes; placeholders become their raw text. Mostly UTF-8 with escapes; now and
        then unescaped, lone surrogates then written as CESU-8 bytes (invalid UTF-8)."""
        ascii_only = self.chance(0.7)
        text = json.dumps(document, ensure_ascii=ascii_only)
        for index in range(len(self._raw) - 1, -1, -1):
            mark = json.dumps(_RAW_MARK.format(index), ensure_ascii=ascii_only)
            text = text.replace(mark, self._raw[index])
        self._raw.clear()
        return text.encode("utf-8", "surrogatepass")

    def damage(self, body: bytes) -> bytes:
        """The body hurt on the way: cut, invalid or overlong UTF-8, a BOM, raw control bytes, buried."""
        at = self.rng.randrange(len(body) + 1)
        kind = self.rng.randrange(7)
        if kind == 0:
            return body[:at]
        if kind == 1:
            invalid = self.pick(
                (b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf8\x88\x80\x80\x80", b"\x80")
            )
            return body[:at] + invalid + body[at:]
        if kind == 2:
            return b"\xef\xbb\xbf" + body
        if kind == 3:
            quote = body.find(b'"', at)
            return (
                body
                if quote < 0
                else body[: quote + 1] + self.pick((b"\x00", b"\x1b", b"\n", b"\x7f")) + body[quote + 1 :]
            )
        if kind == 4:
            depth = self.rng.randrange(200, 3000)
            return b"[" * depth + body + b"]" * depth
        if kind == 5:
            return body + self.pick((b"garbage", b"{}", b"\x00", b" \n "))
        return bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 80)))
