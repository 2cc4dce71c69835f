"""The documentation resolves inside the repository, and so does every citation of it.

A clone has the README, `docs/` and the root documents, nothing else: a comment or a page that
cites notes kept elsewhere sends the reader nowhere. So, over every source and documentation file:

* a `….md` file named anywhere (code comments, docstrings, pages) exists in the repository;
* a cited page section, `docs/<page>.md#<section>`, exists: the page, and a heading with that anchor;
* every Markdown link of the README, the root documents and the `docs/` pages resolves to a file
  of the repository (never out of it, never to the web), and its `#anchor` to a heading of that
  file — with the same anchor on a repository host (GitHub's slugs) and on the MkDocs site
  (Python-Markdown's), since the pages are read in both places;
* the site's navigation lists every page, and the site's quick start is the README's;
* every repository path a document names in code (`q2api/…`, `tests/…`, `bench/…`) exists;
* every `q2api/….py` path and every `q2api.x.y` name a docstring or comment cites exists (a module,
  or a name in one), and so does each one `pyproject.toml`'s comments justify a bound with;
* no table cell puts an escaped pipe inside code (the two renderers disagree on it).

`mkdocs build --strict` (in .ci/run) checks the site's own links and anchors once more.

And the documents say what the program does, where a test can hold them to it:

* every `q2api` command and subcommand has a description for its `--help`;
* every model id a README or docs example sends is one the built-in table serves as it is (no
  substitution) and not one the installed `anthropic` SDK warns is at its end of life;
* the JSON log line the operating page shows has the fields a real request's line has;
* the `/v1/models` fields the clients page names are in a real list entry;
* the admin API tables of the operating page list exactly the admin API's routes.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import io
import json
import re
import subprocess
import sys
import tokenize
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from q2api.frontdoors import field_docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Where sources and documents live; generated and installed trees are left out.
_SCANNED_DIRS = ("q2api", "tests", "bench", "docs", "deploy", ".ci")
_SKIPPED_PARTS = frozenset({"__pycache__", "artifacts", "results", "data", "site"})
_TEXT_SUFFIXES = frozenset({".py", ".md", ".toml", ".yml", ".yaml", ".js", ".html", ".css", ".conf", ".sh", ".txt"})
_TEXT_NAMES = frozenset({"Dockerfile", "run", ".env.example"})

# The Markdown documents read on a repository host: each page's links resolve from its own folder.
_ROOT_DOCUMENTS = ("README.md", "BENCHMARKS.md", "TROUBLESHOOTING_INFINITE_LOOP.md", "bench/README.md")

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`+[^`\n]*`+")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_MD_FILE = re.compile(r"(?<![\w./-])((?:\.\.?/)*[A-Za-z0-9_][\w./-]*\.md)(?![\w-])")
_SECTION_CITATION = re.compile(r"(?<![\w./-])docs/([\w-]+\.md)(?:#([\w-]+))?")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _source_files() -> Iterator[Path]:
    for path in sorted(ROOT.iterdir()):
        if path.is_file() and (path.suffix in _TEXT_SUFFIXES or path.name in _TEXT_NAMES):
            yield path
    for folder in _SCANNED_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            relative = path.relative_to(ROOT)
            if _SKIPPED_PARTS.intersection(relative.parts) or not path.is_file():
                continue
            if path.suffix in _TEXT_SUFFIXES or path.name in _TEXT_NAMES:
                yield path


def _plain_text(heading: str) -> str:
    """A heading's text as rendered: link targets, code ticks and emphasis marks gone."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[`*]", "", text)


def github_slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", _plain_text(heading).lower())
    return text.replace(" ", "-")


def site_slug(heading: str) -> str:
    """Python-Markdown's `toc` slugify, the one MkDocs uses."""
    text = unicodedata.normalize("NFKD", _plain_text(heading)).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _without_code(markdown: str) -> str:
    return _INLINE_CODE.sub("", _FENCE.sub("", markdown))


def anchors(document: Path) -> tuple[set[str], set[str]]:
    """The heading anchors of a Markdown file: (on a repository host, on the site)."""
    host: set[str] = set()
    site: set[str] = set()
    host_seen: dict[str, int] = {}
    site_seen: dict[str, int] = {}
    for match in _HEADING.finditer(_FENCE.sub("", document.read_text(encoding="utf-8"))):
        for slug, seen, found, separator in (
            (github_slug(match[2]), host_seen, host, "-"),
            (site_slug(match[2]), site_seen, site, "_"),
        ):
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}{separator}{count}")
    return host, site


def _anchor_problem(target: Path, anchor: str) -> str | None:
    host, site = anchors(target)
    if anchor in host and anchor in site:
        return None
    if anchor in host or anchor in site:
        where = "a repository host" if anchor in host else "the MkDocs site"
        return f"#{anchor} of {target.name} exists only on {where}: reword that heading"
    return f"{target.name} has no section #{anchor}"


def link_problems(document: Path, base: Path) -> list[str]:
    """Every broken link of one Markdown document whose links resolve from `base`."""
    problems = []
    for match in _LINK.finditer(_without_code(document.read_text(encoding="utf-8"))):
        link = match[1]
        if not link:
            problems.append(f"empty link {match[0]!r}")
            continue
        if _SCHEME.match(link) or link.startswith("//"):
            problems.append(f"{link}: a link out of the repository (name the source in text instead)")
            continue
        path_part, _, anchor = link.partition("#")
        if not path_part:  # a section of the same page
            if (problem := _anchor_problem(document, anchor)) is not None:
                problems.append(f"{link}: {problem}")
            continue
        target = (base / path_part).resolve()
        if not target.is_relative_to(ROOT):
            problems.append(f"{link}: points outside the repository")
        elif not target.exists():
            problems.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and (problem := _anchor_problem(target, anchor)):
            problems.append(f"{link}: {problem}")
    return problems


@pytest.mark.parametrize("name", _ROOT_DOCUMENTS)
def test_the_links_of_the_readme_and_root_documents_resolve(name: str) -> None:
    document = ROOT / name
    assert link_problems(document, document.parent) == []


@pytest.mark.parametrize("name", sorted(path.name for path in DOCS.glob("*.md")))
def test_the_links_of_each_docs_page_resolve(name: str) -> None:
    # A page linked into docs/ from the root (a symlink) is read from docs/ by the site.
    assert link_problems(DOCS / name, DOCS) == []


def test_every_cited_markdown_file_is_in_the_repository() -> None:
    missing = []
    for path in _source_files():
        if path == Path(__file__).resolve():  # its own examples of broken citations
            continue
        for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _MD_FILE.finditer(line):
                cited = match[1]
                # From the citing file's folder, the root, or docs/ (mkdocs.yml names pages from there).
                if not any((base / cited).exists() for base in (path.parent, ROOT, DOCS)):
                    missing.append(f"{path.relative_to(ROOT)}:{line_number}: {cited}")
    assert missing == []


def test_every_cited_docs_section_exists() -> None:
    broken = []
    for path in _source_files():
        for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _SECTION_CITATION.finditer(line):
                page, anchor = DOCS / match[1], match[2]
                where = f"{path.relative_to(ROOT)}:{line_number}: {match[0]}"
                if not page.exists():
                    broken.append(f"{where}: no such page")
                elif anchor and (problem := _anchor_problem(page, anchor)):
                    broken.append(f"{where}: {problem}")
    assert broken == []


def test_the_checks_above_catch_what_they_promise(tmp_path: Path) -> None:
    # The scanners themselves: a broken citation, an unknown anchor, a web link, a file outside.
    page = DOCS / "protocol.md"
    assert _anchor_problem(page, "event-types") is None
    assert _anchor_problem(page, "no-such-section") is not None
    document = tmp_path / "page.md"
    document.write_text(
        "# Title\n\n[web](https://example.com) [up](../../etc/passwd) [gone](nope.md) [self](#title)\n"
        "```\n[in code](https://example.com)\n```\n",
        encoding="utf-8",
    )
    problems = link_problems(document, DOCS)
    assert len(problems) == 3
    assert github_slug("`--workers`: the default stays 1") != site_slug("`--workers`: the default stays 1")
    assert _MD_FILE.search("see " + "NOTES" + ".md, part 2")[1] == "NOTES.md"  # type: ignore[index]


# Folders the tests and benchmarks write (gitignored): named in the docs, absent from a clone.
_GENERATED_FOLDERS = ("tests/artifacts/", "bench/results/")
_REPOSITORY_PATH = re.compile(r"`((?:q2api|tests|bench|deploy|docs|\.ci)/[\w./-]*)`")


def test_every_repository_path_the_documents_name_exists() -> None:
    # Pages name source files in code (`q2api/server/lifecycle/relay.py`), not as links the site cannot follow:
    # a file moved or renamed must take its mentions along.
    documents = [ROOT / name for name in _ROOT_DOCUMENTS] + sorted(DOCS.glob("*.md"))
    missing = [
        f"{document.relative_to(ROOT)}: {match[1]}"
        for document in documents
        for match in _REPOSITORY_PATH.finditer(document.read_text(encoding="utf-8"))
        if not (ROOT / match[1]).exists() and not match[1].startswith(_GENERATED_FOLDERS)
    ]
    assert missing == []


# A source path or a dotted name of the package, as comments and docstrings cite them.
_CITED_PATH = re.compile(r"(?<![\w/.-])(q2api/[\w/]+\.py)\b")
_CITED_NAME = re.compile(r"(?<![\w./-])(q2api(?:\.[A-Za-z_]\w*)+)")


def _comments_and_docstrings(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring


def _name_exists(dotted: str) -> bool:
    """`q2api.a.b.C.d`: the longest importable module prefix, then each further part an attribute
    (or a declared field: a dataclass's or a class's annotations)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if hasattr(found, attribute):
                found = getattr(found, attribute)
                continue
            declared = getattr(found, "__annotations__", {}) if isinstance(found, type) else {}
            return attribute in declared or attribute in getattr(found, "__dataclass_fields__", {})
        return True
    return False


def cited_code_problems(text: str, where: str) -> list[str]:
    problems = [f"{where}: {path}" for path in _CITED_PATH.findall(text) if not (ROOT / path).exists()]
    return problems + [f"{where}: {name}" for name in _CITED_NAME.findall(text) if not _name_exists(name)]


def test_every_module_and_name_a_docstring_or_comment_cites_exists() -> None:
    missing = []
    for folder in ("q2api", "tests", "bench", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():  # its own examples of broken citations
                continue
            for line, text in _comments_and_docstrings(path.read_text(encoding="utf-8")):
                missing.extend(cited_code_problems(text, f"{path.relative_to(ROOT)}:{line}"))
    assert missing == []


def test_each_dependency_bound_names_code_that_exists() -> None:
    """pyproject.toml justifies each upper bound by the code that relies on the library: the comment
    above a bounded dependency names it (a q2api name, or a repository file such as `mkdocs.yml`),
    and every q2api name those comments cite is there."""
    lines = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    problems = []
    comment: list[str] = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped)
            problems.extend(cited_code_problems(stripped, f"pyproject.toml:{number}"))
            continue
        bounded = re.match(r'"[\w.\[\]-]+[^"]*<', stripped)
        reasons = _CITED_NAME.findall(" ".join(comment)) + [
            path for path in re.findall(r"`([\w./-]+\.\w+)`", " ".join(comment)) if (ROOT / path).exists()
        ]
        if bounded and not reasons:
            problems.append(f"pyproject.toml:{number}: {stripped} has an upper bound and names no code it protects")
        comment = []
    assert problems == []


def test_the_cited_code_check_catches_what_it_promises() -> None:
    assert (
        cited_code_problems("see q2api/conversion/claude_converter.py and q2api.conversion.turns.TurnBuilder.", "x")
        == []
    )
    assert cited_code_problems("(q2api.server.transport.TransportLimits.max_headers)", "x") == []  # a field
    assert cited_code_problems("q2api.amazonq.types.ImageBlock.format", "x") == []  # a TypedDict key
    assert cited_code_problems("q2api/tool_input.py, q2api.translation.reasoning", "x") == [
        "x: q2api/tool_input.py",
        "x: q2api.translation.reasoning",
    ]
    assert cited_code_problems("q2api.server.direct_routes.DirectRoutesApp", "x") != []


def test_no_table_cell_escapes_a_pipe_inside_code() -> None:
    # A repository host needs `\|` for a pipe in a table cell, code or not, and shows `|`; the site
    # shows the backslash inside code. A cell says "or" instead, or the row becomes a list item.
    documents = [ROOT / name for name in _ROOT_DOCUMENTS] + sorted(DOCS.glob("*.md"))
    found = [
        f"{document.relative_to(ROOT)}: {code}"
        for document in documents
        for line in _FENCE.sub("", document.read_text(encoding="utf-8")).splitlines()
        if line.startswith("|")
        for code in _INLINE_CODE.findall(line)
        if "\\|" in code
    ]
    assert found == []


def _nav_pages(entries: object) -> Iterator[str]:
    if isinstance(entries, str):
        yield entries
    elif isinstance(entries, list):
        for entry in entries:
            yield from _nav_pages(entry)
    elif isinstance(entries, dict):
        for value in entries.values():
            yield from _nav_pages(value)


def test_the_site_lists_every_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = list(_nav_pages(config["nav"]))
    assert sorted(nav) == sorted(path.name for path in DOCS.glob("*.md"))
    assert (DOCS / "troubleshooting-infinite-loop.md").resolve() == ROOT / "TROUBLESHOOTING_INFINITE_LOOP.md"
    assert (DOCS / "benchmarks.md").resolve() == ROOT / "BENCHMARKS.md"


def test_the_site_quick_start_is_the_readme_setup_command() -> None:
    def first_bash_block(path: Path) -> str:
        match = re.search(r"^```bash\n(.*?)^```", path.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
        assert match, f"{path.name} has no bash block"
        return match[1]

    assert first_bash_block(DOCS / "index.md") == first_bash_block(ROOT / "README.md")


def test_the_site_describes_the_demo_as_the_readme_does() -> None:
    def demo_paragraph(path: Path) -> str:
        text = path.read_text(encoding="utf-8")
        start = text.index("The demo starts the real gateway")
        return text[start : text.index("\n\n", start)]

    assert demo_paragraph(DOCS / "index.md") == demo_paragraph(ROOT / "README.md")
    assert "previous_response_id" in demo_paragraph(ROOT / "README.md")  # the demo's Responses step


def test_every_development_install_command_installs_the_locked_releases() -> None:
    # `pip install -e ".[…]"` is the development install: the releases CI tested, as the README's setup.
    documents = [ROOT / name for name in _ROOT_DOCUMENTS] + sorted(DOCS.glob("*.md"))
    unlocked = [
        f"{document.relative_to(ROOT)}: {command}"
        for document in documents
        for command in re.findall(r"pip install [^`\n]*-e [^`\n]*", document.read_text(encoding="utf-8"))
        if "-c requirements.lock" not in command
    ]
    assert unlocked == []


def test_the_readme_codex_recipe_is_the_config_the_real_codex_is_tested_with() -> None:
    import tomllib

    from tests.support.codex_cli import codex_config

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [recipe] = re.findall(r"^```toml\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert tomllib.loads(recipe) == tomllib.loads(codex_config("http://127.0.0.1:8000", web_search=True))


def test_the_hosted_tools_the_agents_sdk_section_names_are_treated_as_it_says() -> None:
    import orjson

    from q2api.frontdoors.openai_shared import ChatError
    from q2api.frontdoors.responses.door import RESPONSES_DOOR

    page = (DOCS / "clients.md").read_text(encoding="utf-8")
    section = page[page.index("### OpenAI Agents SDK") :].split("\n### ", 1)[0]
    assert "`WebSearchTool`: it\nis sent as the `web_search` tool" in section
    assert "(`FileSearchTool`,\n`CodeInterpreterTool`, …) are refused" in section

    def read(tool: str) -> object:
        return RESPONSES_DOOR.read(
            orjson.dumps({"model": "claude-sonnet-5-5", "input": "hi", "tools": [{"type": tool}]})
        )

    # WebSearchTool is sent as `web_search` (`web_search_preview` by older Agents SDKs): accepted.
    for accepted in ("web_search", "web_search_preview"):
        read(accepted)
    for refused in ("file_search", "code_interpreter"):
        with pytest.raises(ChatError) as error:
            read(refused)
        assert error.value.status == 400 and refused in error.value.message


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason='the docs extra is not installed (pip install -e ".[docs]")')
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# -- the documents against the program -------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser, path: str = "q2api") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield f"{path} {name}", child
                yield from _subparsers(child, f"{path} {name}")


def test_every_command_has_a_description_for_its_help() -> None:
    from q2api.cli.main import build_parser

    commands = dict(_subparsers(build_parser()))
    assert {"q2api demo", "q2api accounts list", "q2api captures rm"} <= set(commands)
    assert [name for name, parser in commands.items() if not (parser.description or "").strip()] == []


# The forms an example names a model in: `model="…"`, `model = "…"` (TOML), `"model": "…"`, and a
# command's `--model ID` or `--models ID,ID` (`q2api keys create`).
_EXAMPLE_MODEL = re.compile(r'(?:\bmodel\s*=\s*|"model"\s*:\s*)"([^"]+)"|--models?[ =]([\w.\[\],-]+)')
# The wire-protocol page quotes captured exchanges as they were; every other page is an example to copy.
_VERBATIM_PAGES = frozenset({"protocol.md"})


def _example_model_ids() -> dict[str, set[str]]:
    documents = [ROOT / name for name in _ROOT_DOCUMENTS] + sorted(DOCS.glob("*.md"))
    found: dict[str, set[str]] = {}
    for document in documents:
        if document.name in _VERBATIM_PAGES:
            continue
        for block in _FENCE.finditer(document.read_text(encoding="utf-8")):
            for quoted, listed in _EXAMPLE_MODEL.findall(block[0]):
                for model in [quoted] if quoted else listed.split(","):
                    found.setdefault(model, set()).add(document.relative_to(ROOT).as_posix())
    return found


def test_the_model_ids_the_examples_send_are_served_and_not_at_their_end_of_life() -> None:
    from anthropic._data import DEPRECATED_MODELS  # the list behind the SDK's end-of-life warning

    from q2api.models.resolution import ModelNotAvailable, UnknownModelPolicy, resolve_against_catalogue
    from q2api.models.table import builtin_catalogue

    examples = _example_model_ids()
    assert "claude-sonnet-5-5" in examples  # the README's own examples are found
    assert "README.md" in examples["claude-sonnet-5-5"] and "docs/keys-and-usage.md" in examples["claude-sonnet-5-5"]
    command = "q2api keys create --models claude-sonnet-4-5,claude-opus-4-8 --rpm 10"
    assert [found for match in _EXAMPLE_MODEL.findall(command) for found in match] == [
        "",
        "claude-sonnet-4-5,claude-opus-4-8",
    ]
    problems = []
    for model, where in sorted(examples.items()):
        if model in DEPRECATED_MODELS:
            problems.append(f"{model} ({', '.join(sorted(where))}): the SDK warns it ends {DEPRECATED_MODELS[model]}")
        try:
            resolve_against_catalogue(model, builtin_catalogue(), aliases={}, policy=UnknownModelPolicy.REJECT)
        except ModelNotAvailable:
            problems.append(f"{model} ({', '.join(sorted(where))}): not in the built-in model table")
    assert problems == []


def test_the_documented_json_log_line_has_the_fields_a_real_request_line_has(tmp_path: Path) -> None:
    import anthropic

    from q2api.testing.simulated_upstream import SimulatedUpstream
    from tests.support.serve_process import CLIENT_KEY, serve

    page = (DOCS / "operating.md").read_text(encoding="utf-8")
    [example] = [line for line in page.splitlines() if line.startswith('{"time":') and "POST /v1/messages" in line]
    documented = re.findall(r'"(\w+)":', example)
    with SimulatedUpstream.run_in_thread() as upstream, serve(tmp_path, upstream.env(), log_format="json") as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key=CLIENT_KEY, max_retries=0)
        client.messages.create(model="claude-sonnet-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        line = server.wait_for(lambda text: '"message":"POST /v1/messages"' in text)
    written = json.loads(line)
    assert documented[:4] == ["time", "level", "message", "logger"]
    assert [field for field in documented if field not in written] == []
    assert list(written)[:4] == ["time", "level", "message", "logger"]


def test_the_model_list_fields_the_clients_page_names_are_in_a_real_entry(tmp_path: Path) -> None:
    import httpx2

    from q2api.testing.simulated_upstream import SimulatedUpstream
    from tests.support.serve_process import CLIENT_KEY, serve

    page = (DOCS / "clients.md").read_text(encoding="utf-8")
    paragraph = page[page.index("`GET /v1/models` lists that catalogue") :].split("\n\n", 1)[0]
    fields = re.findall(r"`([a-z_]+(?:\.[a-z_]+)*)`", paragraph)
    assert {"max_input_tokens", "display_name", "owned_by"} <= set(fields)
    with SimulatedUpstream.run_in_thread() as upstream, serve(tmp_path, upstream.env()) as server:
        listed = httpx2.get(f"{server.base_url}/v1/models", headers={"x-api-key": CLIENT_KEY}, timeout=10).json()
    entry = next(entry for entry in listed["data"] if entry["id"] == "claude-sonnet-5-5")

    def has(document: object, path: str) -> bool:
        for key in path.split("."):
            if not isinstance(document, dict) or key not in document:
                return False
            document = document[key]
        return True

    assert [field for field in fields if not has(entry, field)] == []


def test_the_admin_api_table_lists_exactly_the_admin_routes() -> None:
    from starlette.routing import Route

    from q2api.admin.logins import LoginRunner
    from q2api.admin.routes import admin_routes

    def shape(path: str) -> str:
        return re.sub(r"\{[^}]*\}", "{}", path.split("?", maxsplit=1)[0])

    page = (DOCS / "operating.md").read_text(encoding="utf-8")
    documented = {
        (method, shape(path))
        for method, path in re.findall(r"^\| `([A-Z]+) (/admin/api/[^`]*)` \|", page, re.MULTILINE)
    }
    served = {
        (method, shape(route.path))
        for route in admin_routes("an-admin-key", LoginRunner())
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    assert documented == served


def test_the_field_tables_of_the_clients_page_are_the_codes() -> None:
    # Issue 32: every request field's treatment is in code (q2api.frontdoors.*fields); the page prints it.
    page = (DOCS / "clients.md").read_text(encoding="utf-8")
    assert field_docs.with_tables(page) == page, "run: python -m q2api.frontdoors.field_docs --write"
    for table in field_docs.TABLES:
        assert f"<!-- field-table: {table.door} -->" in page
