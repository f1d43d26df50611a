"""The README and docs/: every relative link and #anchor resolves, the README stays short (its Tests
section too), its keys table is the app's bindings, the configuration they show loads
(docs/configuration.md showing every setting), the results log lists its dated files newest first,
and the architecture page states rules rather than keeping a file tree.

Anchors follow GitHub's rule for a heading's id: the heading's text without its Markdown, lower
case, every character that is not a letter, digit, space, ``-`` or ``_`` dropped, each space a
``-``; a repeated id gets ``-1``, ``-2``, … .
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 250
"""A newcomer reads the README top to bottom; everything longer belongs under docs/."""
README_TESTS_MAX_LINES = 6
"""The README's Tests section: the command, what it runs, where timings live (docs/results/)."""
RESULTS = ROOT / "docs" / "results"

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(RESULTS.glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's id for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        found.update(HTML_ID.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link and image outside code."""
    found = []
    for number, line in prose_lines(text):
        bare = CODE_SPAN.sub("", line)
        found += [(number, target) for target in INLINE_LINK.findall(bare)]
        reference = REFERENCE.match(bare)
        if reference:
            found.append((number, reference.group(1)))
    return found


def broken_links(doc: Path, root: Path) -> list[str]:
    """Each relative link of ``doc`` whose file or #anchor does not exist, as 'FILE:LINE: TARGET (why)'."""
    problems = []
    for number, target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        where = f"{doc.relative_to(root)}:{number}: {target}"
        linked = (doc.parent / path_part).resolve() if path_part else doc
        if root.resolve() not in (linked, *linked.parents):
            problems.append(f"{where} (outside the repository)")
        elif not linked.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text(encoding="utf-8")):
            problems.append(f"{where} (no heading with that anchor)")
    return problems


@pytest.mark.parametrize("doc", documents(), ids=lambda doc: str(doc.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(doc: Path) -> None:
    problems = broken_links(doc, ROOT)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_checker_finds_broken_links(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## The `bench` table, and why\n")
    (tmp_path / "README.md").write_text(
        "# Top\n\n## Keys & models\n\n"
        "[ok](docs/other.md#the-bench-table-and-why) [ok](#keys--models) [web](https://example.com)\n"
        "[gone](docs/missing.md) [bad anchor](docs/other.md#nope) [here](#top-1)\n"
        "`[in code](nowhere.md)`\n\n```\n[fenced](nowhere.md)\n```\n\n[ref]: docs/absent.md\n"
    )
    assert broken_links(tmp_path / "README.md", tmp_path) == [
        "README.md:6: docs/missing.md (no such file)",
        "README.md:6: docs/other.md#nope (no heading with that anchor)",
        "README.md:6: #top-1 (no heading with that anchor)",
        "README.md:13: docs/absent.md (no such file)",
    ]


def test_slug_follows_github() -> None:
    assert slug("What gemma-chat refuses, and why") == "what-gemma-chat-refuses-and-why"
    assert slug("Benchmark: `gemma-chat bench`") == "benchmark-gemma-chat-bench"
    assert slug("GPU / CPU") == "gpu--cpu"
    assert slug("**Bold** [link](x.md) max_model_len") == "bold-link-max_model_len"
    assert anchors("# A\n## A\n```\n# A\n```\n## A\n") == {"a", "a-1", "a-2"}


def test_readme_is_short() -> None:
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail under docs/"


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_tests_section_is_short() -> None:
    lines = [line for line in readme_section("Tests").splitlines() if line.strip()]
    assert len(lines) <= README_TESTS_MAX_LINES, (
        f"the README's Tests section has {len(lines)} lines; dated wall times belong in docs/results/"
    )
    assert "python3 -m tests" in lines[0] and "results/" in "\n".join(lines)


def test_results_index_lists_every_dated_file_newest_first() -> None:
    index = (RESULTS / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| \[(\d{4}-\d{2}-\d{2})\]\(\1\.md\) \|", index, re.MULTILINE)
    dated = sorted((path.stem for path in RESULTS.glob("*.md") if path.stem != "README"), reverse=True)
    assert dated, "docs/results/ holds no dated file"
    assert listed == dated, f"the index lists {listed}; docs/results/ holds {dated}, newest first"


def test_architecture_page_has_no_file_tree() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    entry = re.compile(r"^\s*[\w.-]+(/|\.py)(\s|$)")  # a tree's line starts with a file or folder name
    listed = [line for block in blocks for line in block.splitlines() if entry.match(line)]
    assert len(listed) <= 3, f"docs/architecture.md keeps a file tree: {listed[:5]}"


KEY_NAMES = {"escape": "Esc", "pageup": "PageUp", "pagedown": "PageDown", "enter": "Enter"}


def shown_key(key: str) -> str:
    """Textual's key name as the README writes it: ctrl+r -> Ctrl+R, f2 -> F2, escape -> Esc."""
    return "+".join(
        KEY_NAMES.get(part, part.capitalize() if len(part) > 1 else part.upper()) for part in key.split("+")
    )


def keys_table() -> dict[str, str]:
    """The README's Keys section: binding id -> its key cell, for each row that names an id."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Keys\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[2].startswith("`") and cells[2] != "---":
            rows[cells[2].strip("`")] = cells[0]
    return rows


def test_readme_keys_table_is_the_apps_bindings() -> None:
    from app.tui.app import GemmaChatApp

    table = keys_table()
    bindings = {binding.id: binding.key for binding in GemmaChatApp.BINDINGS if binding.id}
    assert set(table) == set(bindings), "the README's Keys table and GemmaChatApp.BINDINGS differ"
    for binding_id, key in bindings.items():
        assert shown_key(key) in table[binding_id], (
            f"{binding_id}: the app binds {key}, the README says {table[binding_id]}"
        )


def toml_blocks(path: Path) -> list[str]:
    return re.findall(r"^```toml\n(.*?)^```", path.read_text(encoding="utf-8"), re.DOTALL | re.MULTILINE)


def setting_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every settings key, dotted (``engine.max_model_len``); a table's own name too."""
    keys = set()
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        keys.add(key)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and name != "mcp":
            keys |= setting_keys(annotation, key + ".")
    return keys


def documented_keys(block: str) -> set[str]:
    keys, table = set(), ""
    for line in block.splitlines():
        line = (
            line.split("#", 1)[0].strip() if not line.lstrip().startswith("# ") else line.lstrip("# ").strip()
        )
        header = re.match(r"^\[([\w.]+)\]$", line)
        if header:
            table = header.group(1) + "."
            keys.add(header.group(1))
        elif "=" in line:
            keys.add(table + line.split("=", 1)[0].strip())
    return keys


def test_configuration_doc_loads_and_names_every_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend.config.settings import Settings, load_settings

    (block,) = toml_blocks(ROOT / "docs" / "configuration.md")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text(
        block.replace("[mcp.servers.NAME]", "[mcp.servers.time]")
    )
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path))
    load_settings()  # as documented, the file is a valid config
    missing = setting_keys(Settings) - documented_keys(block) - {"mcp.servers", "mcp.import"}
    assert not missing, f"docs/configuration.md does not show {sorted(missing)}"


def test_readme_configuration_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.config.settings import load_settings

    (block,) = toml_blocks(ROOT / "README.md")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text(block)
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path))
    assert load_settings().engine.max_model_len == 8192
