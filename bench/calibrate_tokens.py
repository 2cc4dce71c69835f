"""Calibrate q2api's offline token estimator against a real Claude tokenizer.

    python bench/calibrate_tokens.py                  # error of the current coefficients
    python bench/calibrate_tokens.py --fit            # fit new coefficients, print them and their error
    python bench/calibrate_tokens.py --write-reference tests/anthropic/data/token_reference.json

Reference: the Claude tokenizer (`tokenizer.json`, a 65k byte-level BPE with NFKC) that
the `anthropic` Python SDK shipped up to 0.38.0 for `client.count_tokens()`. Anthropic
documents it as exact for Claude 2 and only approximate for Claude 3 and later, whose
tokenizers are not public. This script downloads it into a scratch directory; nothing here
is a runtime or test dependency of q2api.

Corpus (resembling gateway traffic; fetched with the ordinary package clients into the
scratch directory, each pinned):
  prose      Python's documentation topics (pydoc_data) and the English Debian Reference
  python     CPython standard-library sources
  javascript express 4.21.2 (npm)        typescript  @anthropic-ai/sdk 0.30.1 sources (npm)
  rust       serde_json / regex crates (Debian librust-*-dev)
  markdown   READMEs and changelogs of the packages above
  json_*     Claude Code-like tool schemas and tool inputs (built here)
  shell      ls / git diff / pytest / grep / `cat -n` output (built here from the sources above)
  cjk_zh, cjk_ja, european   Debian Reference translations (zh-CN, ja, fr+de) and CPython's CJK test texts
  emoji, mixed, identifiers  built here
Apt-based sources are skipped (and the report says so) on machines without apt-get.

The held-out set ("handwritten" below) is text written for this project; it and the
synthetic samples are what `--write-reference` stores, so the unit test needs no download
and the repository carries no third-party text.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import gzip
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from q2api.anthropic import token_count

WORK = Path(os.environ.get("Q2API_CALIBRATION_DIR", "/tmp/q2api-calibration"))
TOKENIZER_WHEEL = "anthropic==0.38.0"
TOKENIZERS_PACKAGE = "tokenizers==0.20.3"
NPM_PACKAGES = ("express@4.21.2", "@anthropic-ai/sdk@0.30.1")
DEB_PACKAGES = (
    "debian-reference-en",
    "debian-reference-zh-cn",
    "debian-reference-ja",
    "debian-reference-fr",
    "debian-reference-de",
    "librust-serde-json-dev",
    "librust-regex-dev",
)
SEED = 20240601
SAMPLES_PER_CATEGORY = 160  # half fit the coefficients, the other half measure them
STDLIB = Path(sysconfig.get_paths()["stdlib"])
NOTES: list[str] = []


# ---------------------------------------------------------------- fetching


def _run(cmd: list[str], cwd: Path) -> bool:
    try:
        subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        NOTES.append(f"could not run {' '.join(cmd[:3])}…: {exc}")
        return False


def reference_tokenizer():
    site = WORK / "site"
    if not (site / "tokenizers").exists():
        _run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site), TOKENIZERS_PACKAGE], WORK)
    sys.path.insert(0, str(site))
    from tokenizers import Tokenizer

    tokenizer_json = WORK / "tokenizer.json"
    if not tokenizer_json.exists():
        wheels = WORK / "wheels"
        wheels.mkdir(exist_ok=True)
        _run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), TOKENIZER_WHEEL],
            WORK,
        )
        wheel = next(wheels.glob("anthropic-0.38.0-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            tokenizer_json.write_bytes(zf.read("anthropic/tokenizer.json"))
    return Tokenizer.from_file(str(tokenizer_json))


def npm_sources() -> dict[str, str]:
    """path -> text of every file in the pinned npm tarballs."""
    target = WORK / "npm"
    target.mkdir(exist_ok=True)
    if not list(target.glob("*.tgz")) and shutil.which("npm"):
        _run(["npm", "pack", "--silent", *NPM_PACKAGES], target)
    files: dict[str, str] = {}
    for tgz in sorted(target.glob("*.tgz")):
        with tarfile.open(tgz) as tf:
            for member in tf.getmembers():
                if member.isfile():
                    data = tf.extractfile(member).read()
                    files[f"{tgz.stem}/{member.name}"] = data.decode("utf-8", "replace")
    if not files:
        NOTES.append("npm sources unavailable: javascript/typescript categories skipped")
    return files


def deb_root() -> Path | None:
    target = WORK / "deb"
    extracted = target / "root"
    if extracted.exists():
        return extracted
    if not shutil.which("apt-get"):
        NOTES.append("apt-get unavailable: Debian-based categories (rust, cjk, european) skipped")
        return None
    target.mkdir(exist_ok=True)
    if not _run(["apt-get", "download", *DEB_PACKAGES], target):
        return None
    for deb in target.glob("*.deb"):
        _run(["dpkg-deb", "-x", str(deb), str(extracted)], target)
    return extracted


# ---------------------------------------------------------------- corpus


def _paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]


def _cjk_share(text: str) -> float:
    return sum(1 for ch in text if "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef") / max(1, len(text))


def _debian_reference(root: Path, lang: str) -> str:
    path = root / f"usr/share/debian-reference/debian-reference.{lang}.txt.gz"
    return gzip.decompress(path.read_bytes()).decode("utf-8") if path.exists() else ""


def _unwrap(paragraph: str, cjk: bool) -> str:
    lines = [line.strip() for line in paragraph.splitlines()]
    return ("" if cjk else " ").join(lines)


def _stdlib_python() -> dict[str, str]:
    names = [
        "argparse.py",
        "json/decoder.py",
        "http/client.py",
        "asyncio/streams.py",
        "dataclasses.py",
        "textwrap.py",
        "pathlib.py",
        "logging/__init__.py",
        "subprocess.py",
        "typing.py",
        "email/message.py",
        "unittest/case.py",
        "shutil.py",
        "tempfile.py",
        "enum.py",
        "csv.py",
    ]
    return {name: (STDLIB / name).read_text(encoding="utf-8") for name in names}


def _chunk(rng: random.Random, docs: list[str], count: int, lo: int = 24, hi: int = 6000) -> list[str]:
    docs = [d for d in docs if d.strip()]
    out: list[str] = []
    while docs and len(out) < count:
        doc = rng.choice(docs)
        size = int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        if len(doc) <= size:
            out.append(doc)
            continue
        start = rng.randrange(0, len(doc) - size)
        # Start at a line boundary when one is near, as a tool result or a pasted file would.
        newline = doc.find("\n", start, start + 200)
        start = newline + 1 if newline != -1 else start
        piece = doc[start : start + size]
        if piece.strip():
            out.append(piece)
    return out


def _files(files: dict[str, str], *suffixes: str) -> list[str]:
    return [text for path, text in sorted(files.items()) if path.endswith(suffixes)]


def build_corpus(rng: random.Random) -> dict[str, list[str]]:
    n = SAMPLES_PER_CATEGORY
    python_files = _stdlib_python()
    npm = npm_sources()
    deb = deb_root()
    corpus: dict[str, list[str]] = {}

    import pydoc_data.topics

    prose_docs = [_unwrap(p, cjk=False) for t in pydoc_data.topics.topics.values() for p in _paragraphs(t)]
    prose_docs = [p for p in prose_docs if len(p) > 200 and p.count("  ") < 3]
    if deb:
        en = _paragraphs(_debian_reference(deb, "en"))
        prose_docs += [_unwrap(p, cjk=False) for p in en if len(p) > 200 and "|" not in p]
    corpus["prose"] = _chunk(rng, ["\n\n".join(rng.sample(prose_docs, 12)) for _ in range(60)], n)
    corpus["python"] = _chunk(rng, list(python_files.values()), n)
    if npm:
        corpus["javascript"] = _chunk(rng, _files(npm, ".js"), n)
        corpus["typescript"] = _chunk(rng, [t for p, t in npm.items() if "/src/" in p and p.endswith(".ts")], n)
    rust_sources = []
    markdown = _files(npm, ".md")
    if deb:
        registry = deb / "usr/share/cargo/registry"
        rust_sources = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(registry.rglob("*.rs"))]
        markdown += [p.read_text(encoding="utf-8") for p in sorted(registry.rglob("*.md"))]
        corpus["rust"] = _chunk(rng, rust_sources, n)
    corpus["markdown"] = _chunk(rng, markdown, n)

    code_docs = list(python_files.values()) + _files(npm, ".js", ".ts") + rust_sources
    corpus["json_schema"] = [orjson.dumps(t).decode() for t in tool_definitions(rng, n)]
    corpus["json_tool_input"] = [orjson.dumps(i).decode() for i in tool_inputs(rng, code_docs, n)]
    corpus["shell"] = shell_outputs(rng, code_docs, n)

    cjk_test_texts = [
        Path(p).read_text(encoding="utf-8") for p in sorted(glob.glob(str(STDLIB / "test/cjkencodings/*-utf8.txt")))
    ]
    zh_mixed: list[str] = []
    ja_mixed: list[str] = []
    if deb:
        for lang, bucket in (("zh-cn", "cjk_zh"), ("ja", "cjk_ja")):
            paragraphs = [_unwrap(p, cjk=True) for p in _paragraphs(_debian_reference(deb, lang)) if "|" not in p]
            pure = [p for p in paragraphs if _cjk_share(p) > 0.6 and len(p) > 40]
            mixed = [p for p in paragraphs if 0.15 < _cjk_share(p) <= 0.6 and len(p) > 40]
            corpus[bucket] = _chunk(
                rng, ["\n".join(rng.sample(pure, 8)) for _ in range(60)] + cjk_test_texts, n, hi=3000
            )
            (zh_mixed if lang == "zh-cn" else ja_mixed).extend(mixed)
        european = []
        for lang in ("fr", "de"):
            paragraphs = _paragraphs(_debian_reference(deb, lang))
            european += [_unwrap(p, cjk=False) for p in paragraphs if len(p) > 200 and "|" not in p]
        corpus["european"] = _chunk(rng, ["\n\n".join(rng.sample(european, 8)) for _ in range(60)], n)
    corpus["emoji"] = emoji_texts(rng, n)
    corpus["mixed"] = mixed_texts(rng, zh_mixed + ja_mixed, code_docs, n)
    corpus["identifiers"] = identifier_texts(rng, n)
    return corpus


# ---------------------------------------------------------------- synthetic material

_WORDS = [
    "file",
    "path",
    "line",
    "read",
    "write",
    "edit",
    "search",
    "pattern",
    "match",
    "result",
    "output",
    "error",
    "value",
    "list",
    "item",
    "string",
    "number",
    "boolean",
    "object",
    "array",
    "request",
    "response",
    "token",
    "model",
    "message",
    "content",
    "block",
    "tool",
    "input",
    "schema",
    "name",
    "description",
    "default",
    "optional",
    "required",
    "directory",
    "project",
    "test",
    "command",
    "run",
    "shell",
    "process",
    "status",
    "code",
    "change",
    "diff",
    "commit",
    "branch",
    "repository",
    "user",
    "session",
    "context",
    "window",
    "limit",
    "timeout",
    "retry",
    "stream",
    "event",
    "parse",
    "validate",
    "convert",
    "format",
    "return",
    "when",
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "for",
    "with",
    "that",
    "this",
    "by",
    "from",
    "if",
    "or",
    "not",
    "be",
    "are",
    "it",
    "as",
    "on",
    "use",
    "can",
    "only",
    "must",
    "should",
]


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def tool_definitions(rng: random.Random, count: int) -> list[dict]:
    """Claude Code-like tool definitions (names, prose descriptions, JSON Schema 2020-12)."""
    out = list(HANDWRITTEN_TOOLS)
    kinds = ("string", "integer", "boolean", "number")
    while len(out) < count:
        props = {}
        for _ in range(rng.randint(1, 7)):
            name = "_".join(rng.sample(_WORDS[:60], rng.randint(1, 2)))
            prop: dict = {"type": rng.choice(kinds), "description": _sentence(rng, rng.randint(4, 30))}
            if rng.random() < 0.2:
                prop = {"type": "array", "items": {"type": "string"}, "description": prop["description"]}
            if rng.random() < 0.2:
                prop["enum"] = rng.sample(_WORDS, 3)
            props[name] = prop
        description = " ".join(_sentence(rng, rng.randint(6, 25)) for _ in range(rng.randint(1, 12)))
        if rng.random() < 0.5:
            description += "\n\nUsage:\n" + "\n".join(f"- {_sentence(rng, 10)}" for _ in range(rng.randint(2, 6)))
        out.append(
            {
                "name": "".join(w.capitalize() for w in rng.sample(_WORDS[:60], 2)),
                "description": description,
                "input_schema": {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": props,
                    "required": sorted(rng.sample(sorted(props), rng.randint(0, len(props)))),
                    "additionalProperties": False,
                },
            }
        )
    return out[:count]


def _code_piece(rng: random.Random, code_docs: list[str], lo: int, hi: int) -> str:
    return _chunk(rng, code_docs, 1, lo, hi)[0]


def _path(rng: random.Random) -> str:
    depth = rng.randint(1, 4)
    parts = [rng.choice(("src", "lib", "tests", "app", "pkg", "internal", "docs")) for _ in range(depth)]
    ext = rng.choice((".py", ".ts", ".rs", ".js", ".md", ".json", ".toml"))
    return "/home/dev/project/" + "/".join(parts) + "/" + "_".join(rng.sample(_WORDS[:60], 2)) + ext


def tool_inputs(rng: random.Random, code_docs: list[str], count: int) -> list[dict]:
    out: list[dict] = []
    while len(out) < count:
        kind = rng.randrange(6)
        if kind == 0:
            cmd = rng.choice(("git status", "ls -la", "pytest -q tests/", "npm test", "cargo build --release"))
            out.append({"command": f"cd {_path(rng).rsplit('/', 1)[0]} && {cmd}", "description": _sentence(rng, 6)})
        elif kind == 1:
            out.append(
                {
                    "file_path": _path(rng),
                    "old_string": _code_piece(rng, code_docs, 40, 1500),
                    "new_string": _code_piece(rng, code_docs, 40, 1500),
                }
            )
        elif kind == 2:
            out.append({"file_path": _path(rng), "content": _code_piece(rng, code_docs, 200, 8000)})
        elif kind == 3:
            statuses = ("pending", "in_progress", "completed")
            todos = [
                {
                    "content": _sentence(rng, rng.randint(3, 12)),
                    "status": rng.choice(statuses),
                    "activeForm": _sentence(rng, 4),
                }
                for _ in range(rng.randint(1, 8))
            ]
            out.append({"todos": todos})
        elif kind == 4:
            out.append(
                {
                    "pattern": rng.choice(("def \\w+\\(", "TODO|FIXME", "import .*", "class [A-Z]")),
                    "path": _path(rng),
                    "output_mode": "content",
                    "-n": True,
                }
            )
        else:
            out.append({"file_path": _path(rng), "offset": rng.randint(1, 900), "limit": rng.choice((50, 200, 2000))})
    return out


def shell_outputs(rng: random.Random, code_docs: list[str], count: int) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        kind = rng.randrange(5)
        code = _code_piece(rng, code_docs, 300, 5000)
        lines = code.splitlines()
        if kind == 0:  # Claude Code's Read tool: cat -n style
            start = rng.randint(1, 800)
            out.append("\n".join(f"{start + i:>6}\t{line}" for i, line in enumerate(lines)))
        elif kind == 1:  # git diff
            changed = [line + "  # changed" if rng.random() < 0.15 else line for line in lines if rng.random() > 0.05]
            diff = difflib.unified_diff(lines, changed, "a/" + _path(rng)[18:], "b/" + _path(rng)[18:], lineterm="")
            out.append("\n".join(diff) or code)
        elif kind == 2:  # grep -rn
            out.append(
                "\n".join(f"{_path(rng)[18:]}:{rng.randint(1, 3000)}:{line}" for line in lines[:40] if line.strip())
            )
        elif kind == 3:  # ls -la
            rows = [f"total {rng.randint(8, 900)}"]
            for _ in range(rng.randint(3, 40)):
                rows.append(
                    f"{rng.choice(('-rw-r--r--', 'drwxr-xr-x', '-rwxr-xr-x'))} {rng.randint(1, 9)} dev dev "
                    f"{rng.randint(0, 99999):>6} {rng.choice(('Jan', 'Mar', 'Jul', 'Nov'))} {rng.randint(1, 28):>2} "
                    f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {_path(rng).rsplit('/', 1)[1]}"
                )
            out.append("\n".join(rows))
        else:  # pytest
            rows = [
                "============================= test session starts ==============================",
                "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
                f"collected {rng.randint(5, 400)} items",
                "",
            ]
            for _ in range(rng.randint(3, 30)):
                rows.append(
                    f"tests/test_{rng.choice(_WORDS[:60])}.py::test_{'_'.join(rng.sample(_WORDS[:60], 3))} "
                    f"{rng.choice(('PASSED', 'PASSED', 'FAILED', 'SKIPPED'))} [{rng.randint(1, 100):>3}%]"
                )
            rows += [
                "",
                "=" * 30 + " FAILURES " + "=" * 30,
                *lines[:15],
                f"E   AssertionError: assert {rng.randint(0, 99)} == {rng.randint(0, 99)}",
                f"========= {rng.randint(1, 9)} failed, {rng.randint(10, 300)} passed in {rng.uniform(0.5, 90):.2f}s =========",
            ]
            out.append("\n".join(rows))
    return out


_EMOJI = "😀😂🥲😍🤔🙏👍👎🔥🚀🎉✅❌⚠️💡📦🐛🔧📝✨🌟💯🤖👀🧪📊🔒⭐️❤️👨‍💻👩‍🔬🇺🇸🇯🇵🏳️‍🌈👍🏽"


def emoji_texts(rng: random.Random, count: int) -> list[str]:
    singles = list(_EMOJI)
    out: list[str] = []
    for _ in range(count):
        rows = []
        for _ in range(rng.randint(1, 12)):
            style = rng.randrange(3)
            if style == 0:
                rows.append(f"{rng.choice(singles)} {_sentence(rng, rng.randint(3, 12))}")
            elif style == 1:
                rows.append(
                    " ".join(
                        rng.choice(_WORDS) + (rng.choice(singles) if rng.random() < 0.3 else "") for _ in range(12)
                    )
                )
            else:
                rows.append("".join(rng.choice(singles) for _ in range(rng.randint(1, 8))))
        out.append("\n".join(rows))
    return out


def mixed_texts(rng: random.Random, cjk_mixed: list[str], code_docs: list[str], count: int) -> list[str]:
    out = _chunk(rng, cjk_mixed, count // 2, hi=2500) if cjk_mixed else []
    zh = "请帮我修改这个函数，让它支持异步调用。这段代码在运行测试的时候报错了，错误信息如下："
    ja = "この関数を非同期に対応させてください。テストを実行するとエラーが発生します："
    while len(out) < count:
        lead = rng.choice((zh, ja, HANDWRITTEN["cjk_zh"][0][:60]))
        code = _code_piece(rng, code_docs, 80, 1500)
        out.append(f"{lead}\n\n```\n{code}\n```\n\n{rng.choice(_EMOJI)} {_sentence(rng, 8)}")
    return out


def identifier_texts(rng: random.Random, count: int) -> list[str]:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    out: list[str] = []
    for _ in range(count):
        rows = []
        for _ in range(rng.randint(1, 15)):
            kind = rng.randrange(5)
            if kind == 0:
                rows.append(
                    "-".join("".join(rng.choice("0123456789abcdef") for _ in range(k)) for k in (8, 4, 4, 4, 12))
                )
            elif kind == 1:
                rows.append("toolu_" + "".join(rng.choice(alphabet) for _ in range(24)))
            elif kind == 2:
                rows.append("".join(rng.choice("0123456789abcdef") for _ in range(40)))
            elif kind == 3:
                import base64

                rows.append(base64.b64encode(rng.randbytes(rng.randint(12, 300))).decode())
            else:
                rows.append("https://example.com/" + _path(rng)[18:] + f"?id={rng.randint(1, 10**9)}")
        out.append("\n".join(rows))
    return out


# ---------------------------------------------------------------- held-out, written for this project

HANDWRITTEN_TOOLS = [
    {
        "name": "Bash",
        "description": (
            "Runs a shell command in a persistent session and returns what it printed. Use it for git, "
            "package managers, test runners and build tools; prefer the dedicated tools for reading, "
            "searching and editing files.\n\nUsage notes:\n- Quote paths that contain spaces.\n- Commands "
            "time out after 120000 ms unless a timeout is given (at most 600000 ms).\n- Output longer than "
            "30000 characters is truncated.\n- Chain dependent commands with '&&'; run independent ones in parallel."
        ),
        "input_schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run"},
                "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000)"},
                "description": {"type": "string", "description": "What the command does, in 5-10 words"},
                "run_in_background": {
                    "type": "boolean",
                    "description": "Run without waiting for it to finish",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
    {
        "name": "Edit",
        "description": (
            "Replaces an exact string in a file. The file must have been read first. old_string must match "
            "the file exactly, including indentation, and must be unique unless replace_all is true."
        ),
        "input_schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "Absolute path of the file to modify"},
                "old_string": {"type": "string", "description": "The text to replace"},
                "new_string": {"type": "string", "description": "The text to put in its place"},
                "replace_all": {
                    "type": "boolean",
                    "default": False,
                    "description": "Replace every occurrence",
                },
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": False,
        },
    },
    {
        "name": "TodoWrite",
        "description": "Creates and updates the structured task list for the current session.",
        "input_schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "activeForm": {"type": "string", "minLength": 1},
                        },
                        "required": ["content", "status", "activeForm"],
                        "additionalProperties": False,
                    },
                    "description": "The updated todo list",
                }
            },
            "required": ["todos"],
            "additionalProperties": False,
        },
    },
]

HANDWRITTEN: dict[str, list[str]] = {
    "prose": [
        "The gateway accepts requests in the format of the Claude Messages API and forwards them to "
        "Amazon Q. Because the upstream service has no field for a system prompt, the system text is "
        "carried as the first turn of the conversation, followed by a short acknowledgement. Tool "
        "definitions travel with the current message only, and every tool named in the history must "
        "still be listed there; otherwise the service rejects the request with a terse validation error.",
        "Token counts matter more than they seem. A client that believes its context is half empty will "
        "keep adding files and tool output until the service refuses the request outright, and by then "
        "the only way forward is to summarise the conversation. Estimating a little high is therefore "
        "safer than estimating low: compaction runs a few turns early, which costs far less than a failure.",
    ],
    "python": [
        "from __future__ import annotations\n\nimport asyncio\nfrom dataclasses import dataclass, field\n\n\n"
        "@dataclass(slots=True)\nclass RetryPolicy:\n    attempts: int = 3\n    base_delay: float = 0.25\n"
        "    retry_on: tuple[int, ...] = (429, 500, 503)\n\n    def delay(self, attempt: int) -> float:\n"
        '        """Exponential back-off, capped at eight seconds."""\n        return min(8.0, self.base_delay * 2 ** attempt)\n\n\n'
        "async def fetch_with_retry(session, url: str, policy: RetryPolicy) -> bytes:\n"
        "    for attempt in range(policy.attempts):\n        async with session.get(url) as response:\n"
        "            if response.status not in policy.retry_on:\n                response.raise_for_status()\n"
        "                return await response.read()\n        await asyncio.sleep(policy.delay(attempt))\n"
        '    raise TimeoutError(f"{url} still failing after {policy.attempts} attempts")\n',
    ],
    "javascript": [
        "export function groupBy(items, keyOf) {\n  const groups = new Map();\n  for (const item of items) {\n"
        "    const key = keyOf(item);\n    if (!groups.has(key)) groups.set(key, []);\n    groups.get(key).push(item);\n"
        "  }\n  return groups;\n}\n\nconst byStatus = groupBy(tasks, (t) => t.status ?? 'pending');\n"
        "console.log(`${byStatus.get('done')?.length ?? 0} of ${tasks.length} tasks done`);\n",
    ],
    "rust": [
        "use std::collections::HashMap;\n\n#[derive(Debug, Clone, PartialEq)]\npub enum Value {\n    Null,\n"
        "    Number(f64),\n    Text(String),\n    List(Vec<Value>),\n}\n\nimpl Value {\n"
        "    pub fn as_text(&self) -> Option<&str> {\n        match self {\n            Value::Text(s) => Some(s.as_str()),\n"
        "            _ => None,\n        }\n    }\n}\n\nfn count_words(text: &str) -> HashMap<&str, usize> {\n"
        "    let mut counts = HashMap::new();\n    for word in text.split_whitespace() {\n"
        "        *counts.entry(word).or_insert(0) += 1;\n    }\n    counts\n}\n",
    ],
    "markdown": [
        "## Installation\n\n```bash\npip install q2api\nq2api serve --port 8000\n```\n\n### Configuration\n\n"
        "| variable | default | meaning |\n|---|---|---|\n| `Q2API_API_KEYS` | empty | client keys |\n"
        "| `Q2API_LOG_LEVEL` | `INFO` | log level |\n\n> **Note:** the refresh token is stored in `./data`.\n\n"
        "- [x] streaming\n- [x] tool use\n- [ ] prompt caching\n",
    ],
    "shell": [
        "$ git status\nOn branch main\nYour branch is up to date with 'origin/main'.\n\nChanges not staged for commit:\n"
        '  (use "git add <file>..." to update what will be committed)\n\tmodified:   q2api/anthropic/token_count.py\n'
        "\tmodified:   tests/test_token_count.py\n\nUntracked files:\n\tbench/calibrate_tokens.py\n\n"
        "$ pytest -q\n........................................................ [ 87%]\n........                       [100%]\n"
        "64 passed in 1.92s\n",
        'Traceback (most recent call last):\n  File "/srv/app/q2api/relay.py", line 142, in handle\n'
        '    input_tokens = estimate_request_tokens(request)\n  File "/srv/app/q2api/anthropic/token_count.py", '
        "line 88, in estimate_request_tokens\n    return max(1, round(fixed + texts_cost(texts)))\n"
        "TypeError: unsupported operand type(s) for +: 'float' and 'NoneType'\n"
        'INFO:     127.0.0.1:53122 - "POST /v1/messages?beta=true HTTP/1.1" 500 Internal Server Error\n',
    ],
    "cjk_zh": [
        "这个网关把 Claude 的消息接口转换成 Amazon Q 的请求格式。因为上游服务没有系统提示词字段，所以系统文本会作为"
        "对话的第一轮发送，后面跟一句简短的确认。工具定义只随当前消息发送，历史中出现过的每个工具都必须仍然列在其中，"
        "否则服务会直接拒绝请求。估算令牌数时宁可偏高一些，这样自动压缩会提前几轮发生，而不是在请求失败之后。",
        "请帮我看一下这个测试为什么失败。我在本地运行的时候一切正常，但是在持续集成环境里总是超时。"
        "日志显示连接池已经用完了，每个请求都在等待空闲连接。我怀疑是某个地方没有正确关闭响应，"
        "导致连接一直被占用。你能先检查一下上游客户端的代码，然后告诉我应该怎么修改吗？",
        "## 安装说明\n\n1. 克隆仓库并进入项目目录。\n2. 创建虚拟环境，然后安装依赖：`pip install -e .`\n"
        "3. 复制配置文件模板，填写刷新令牌和客户端信息。\n4. 运行 `q2api serve` 启动服务，默认监听本机的八千端口。\n\n"
        "注意：令牌文件只允许当前用户读取，请不要把它提交到代码仓库。",
    ],
    "cjk_ja": [
        "このゲートウェイは Claude のメッセージ API を Amazon Q のリクエスト形式に変換します。上流のサービスには"
        "システムプロンプトの項目がないため、システムの文章は会話の最初のターンとして送られます。トークン数の見積もりは"
        "少し多めのほうが安全です。圧縮が数ターン早く実行されるだけで、リクエストの失敗よりはるかに損失が小さいからです。",
        "テストが CI でだけ失敗する原因を調べてください。ローカルでは問題なく通りますが、CI では毎回タイムアウトします。"
        "ログを見ると接続プールが枯渇しているようです。どこかでレスポンスを閉じ忘れているのではないかと思います。",
    ],
    "emoji": [
        "✅ All 64 tests passed\n❌ Lint failed: 3 warnings\n🚀 Deployed to staging 🎉\n⚠️ Token refresh in 5 minutes\n"
        "👍🏽 Looks good to me! 👨‍💻 Pushing the fix now 🔧",
    ],
}


# ---------------------------------------------------------------- evaluation and fitting


def reference_counts(tokenizer, texts: list[str]) -> list[int]:
    return [len(e.ids) for e in tokenizer.encode_batch(texts)]


def _stats(estimates: list[float], references: list[int]) -> dict:
    errors = [(e - r) / r for e, r in zip(estimates, references, strict=False) if r]
    abs_errors = sorted(abs(x) for x in errors)
    return {
        "n": len(errors),
        "ref_tokens": sum(references),
        "mape": sum(abs_errors) / len(abs_errors),
        "bias": sum(errors) / len(errors),
        "p90": abs_errors[int(0.9 * (len(abs_errors) - 1))],
        "worst": abs_errors[-1],
        "aggregate": sum(estimates) / sum(references) - 1,
    }


def evaluate(data: dict[str, tuple[list[str], list[int]]], title: str) -> dict[str, dict]:
    print(f"\n{title}")
    print(
        f"{'category':<16}{'n':>4}{'ref tok':>9}{'chars/tok':>10}{'MAPE':>8}{'bias':>8}{'p90':>8}{'worst':>8}{'sum err':>9}"
    )
    table = {}
    for category, (texts, refs) in data.items():
        estimates = [token_count.estimate_text_tokens(t) for t in texts]
        s = _stats(estimates, refs)
        table[category] = s
        chars = sum(len(t) for t in texts) / s["ref_tokens"]
        print(
            f"{category:<16}{s['n']:>4}{s['ref_tokens']:>9}{chars:>10.2f}{s['mape']:>8.1%}{s['bias']:>+8.1%}"
            f"{s['p90']:>8.1%}{s['worst']:>8.1%}{s['aggregate']:>+9.1%}"
        )
    everything = [(t, r) for texts, refs in data.values() for t, r in zip(texts, refs, strict=False)]
    s = _stats([token_count.estimate_text_tokens(t) for t, _ in everything], [r for _, r in everything])
    macro = sum(v["mape"] for v in table.values()) / len(table)
    print(
        f"{'ALL':<16}{s['n']:>4}{s['ref_tokens']:>9}{'':>10}{s['mape']:>8.1%}{s['bias']:>+8.1%}{s['p90']:>8.1%}"
        f"{s['worst']:>8.1%}{s['aggregate']:>+9.1%}   (mean of category MAPEs {macro:.1%})"
    )
    table["ALL"] = s
    return table


def evaluate_by_size(data: dict[str, tuple[list[str], list[int]]]) -> None:
    pairs = [(t, r) for texts, refs in data.values() for t, r in zip(texts, refs, strict=False)]
    print(f"\n{'reference tokens':<18}{'n':>5}{'MAPE':>8}{'bias':>8}{'p90':>8}{'worst':>8}")
    for low, high in ((1, 10), (10, 50), (50, 200), (200, 1000), (1000, 10**9)):
        chosen = [(t, r) for t, r in pairs if low <= r < high]
        if chosen:
            s = _stats([token_count.estimate_text_tokens(t) for t, _ in chosen], [r for _, r in chosen])
            label = f"{low}-{high - 1}" if high < 10**9 else f"{low}+"
            print(f"{label:<18}{s['n']:>5}{s['mape']:>8.1%}{s['bias']:>+8.1%}{s['p90']:>8.1%}{s['worst']:>8.1%}")


def _features(text: str) -> list[float]:
    return [*token_count.text_features(text.encode("utf-8")), 1.0]


COEFFICIENT_NAMES = (*token_count.COEFFICIENT_NAMES, "TOKENS_PER_STRING")


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the system is small)."""
    n = len(b)
    m = [[*row[:], b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-12:
            continue
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=False)]
    return [m[i][n] / m[i][i] if abs(m[i][i]) > 1e-12 else 0.0 for i in range(n)]


def fit(data: dict[str, tuple[list[str], list[int]]]) -> list[float]:
    """Least squares on relative error, every category weighted equally; a small ridge keeps
    coefficients of classes a category lacks from drifting."""
    k = len(COEFFICIENT_NAMES)
    ata = [[0.0] * k for _ in range(k)]
    atb = [0.0] * k
    for texts, refs in data.values():
        weight = 1.0 / len(texts)
        for text, ref in zip(texts, refs, strict=False):
            x = [v / ref for v in _features(text)]
            for i in range(k):
                atb[i] += weight * x[i]
                for j in range(k):
                    ata[i][j] += weight * x[i] * x[j]
    for i in range(k):
        ata[i][i] += 1e-9
    return _solve(ata, atb)


def request_mixtures(data: dict[str, tuple[list[str], list[int]]], rng: random.Random, count: int = 300):
    """Request-sized mixtures of corpus samples: (pieces, reference tokens) pairs.

    Half are "topical" (a request dominated by two or three kinds of content, like a real
    session), half "adversarial" (every kind interleaved), which is the hard case for sampling.
    """
    pool = [(c, t, r) for c, (texts, refs) in data.items() for t, r in zip(texts, refs, strict=False)]
    categories = sorted(data)
    out = []
    for n in range(count):
        size = rng.randint(20, 400)
        if n % 2 == 0:
            chosen = set(rng.sample(categories, rng.randint(2, 3)))
            picked = [p for p in rng.sample(pool, min(len(pool), size * 4)) if p[0] in chosen][:size]
        else:
            picked = rng.sample(pool, size)
        out.append(([t for _, t, _ in picked], sum(r for _, _, r in picked)))
    return out


def evaluate_requests(data: dict[str, tuple[list[str], list[int]]]) -> None:
    """Whole-request error: the estimator prices a request's texts together (sampled
    when long), so measure that path against the sum of the reference counts."""
    mixtures = request_mixtures(data, random.Random(SEED + 7))
    model_errors, sampling_errors = [], []
    for pieces, reference in mixtures:
        estimate = token_count.texts_cost(pieces)
        joined = token_count._SEPARATOR.join(pieces)
        exact = token_count.TOKENS_PER_STRING * len(pieces) + token_count._priced(joined)
        model_errors.append(estimate / reference - 1)
        sampling_errors.append(estimate / exact - 1)
    sizes = sorted(sum(len(p) for p in pieces) for pieces, _ in mixtures)
    print(
        f"\nwhole requests: {len(mixtures)} mixtures of corpus samples, {sizes[0] // 1024}-{sizes[-1] // 1024} K characters"
    )
    for label, errors in (
        ("estimate vs reference", model_errors),
        ("sampling alone (vs exact pricing)", sampling_errors),
    ):
        magnitudes = sorted(abs(e) for e in errors)
        print(
            f"  {label:<36} mean |err| {sum(magnitudes) / len(magnitudes):6.1%}  bias {sum(errors) / len(errors):+6.1%}"
            f"  p90 {magnitudes[int(0.9 * (len(magnitudes) - 1))]:6.1%}  worst {magnitudes[-1]:6.1%}"
        )


def main() -> None:
    global SAMPLES_PER_CATEGORY
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="fit coefficients and report their error")
    parser.add_argument("--write-reference", type=Path, help="store held-out + synthetic samples with their counts")
    parser.add_argument("--samples", type=int, default=SAMPLES_PER_CATEGORY, help="samples per category")
    args = parser.parse_args()
    SAMPLES_PER_CATEGORY = args.samples

    WORK.mkdir(parents=True, exist_ok=True)
    tokenizer = reference_tokenizer()
    rng = random.Random(SEED)
    corpus = build_corpus(rng)
    counted = {c: (texts, reference_counts(tokenizer, texts)) for c, texts in corpus.items() if texts}
    # Even-numbered samples fit, odd-numbered ones measure: the figures are out of sample.
    fitting = {c: (texts[0::2], refs[0::2]) for c, (texts, refs) in counted.items()}
    measuring = {c: (texts[1::2], refs[1::2]) for c, (texts, refs) in counted.items()}
    held_out = {c: (texts, reference_counts(tokenizer, texts)) for c, texts in HANDWRITTEN.items()}

    print(f"reference: Claude tokenizer from {TOKENIZER_WHEEL}; corpus seed {SEED}; Python {sys.version.split()[0]}")
    if args.fit:
        coefficients = fit(fitting)
        print("fitted coefficients (paste into q2api/anthropic/token_count.py):")
        for name, value in zip(COEFFICIENT_NAMES, coefficients, strict=False):
            print(f"{name} = {value:.4f}")
            setattr(token_count, name, round(value, 4))
    evaluate(measuring, "measurement half of the corpus (each sample priced alone)")
    evaluate_by_size(measuring)
    evaluate(held_out, "held-out samples written for this project")
    evaluate_requests(measuring)
    for note in NOTES:
        print("note:", note)

    if args.write_reference:
        synthetic = {
            "json_schema": [orjson.dumps(t).decode() for t in tool_definitions(random.Random(SEED + 1), 12)],
            "json_tool_input": [
                orjson.dumps(i).decode()
                for i in tool_inputs(
                    random.Random(SEED + 2),
                    [HANDWRITTEN["python"][0], HANDWRITTEN["rust"][0], HANDWRITTEN["javascript"][0]],
                    12,
                )
            ],
            "emoji": emoji_texts(random.Random(SEED + 3), 8),
            "identifiers": identifier_texts(random.Random(SEED + 4), 8),
        }
        samples = [
            {"category": c, "text": t, "tokens": n}
            for c, texts in {**HANDWRITTEN, **synthetic}.items()
            for t, n in zip(texts, reference_counts(tokenizer, texts), strict=False)
        ]
        args.write_reference.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "reference": f"Claude tokenizer shipped in {TOKENIZER_WHEEL} (tokenizer.json)",
            "generated_by": "python bench/calibrate_tokens.py --write-reference tests/anthropic/data/token_reference.json",
            "samples": samples,
        }
        args.write_reference.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {len(samples)} samples to {args.write_reference}")


if __name__ == "__main__":
    main()
