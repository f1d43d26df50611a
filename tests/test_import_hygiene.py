"""backend/ never loads a UI module; the command line loads no heavy module before it needs one."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import backend

UI_MODULES = ("textual", "rich", "app")
HEAVY_MODULES = ("torch", "vllm", "transformers", "textual")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_backend_imports_no_ui_module() -> None:
    names = [m.name for m in pkgutil.walk_packages(backend.__path__, "backend.")]
    assert "backend.engine.local.vllm" in names and "backend.checkpoints.writer" in names
    loaded = _loaded_after("\n".join(f"import {name}" for name in names))
    assert not loaded & set(UI_MODULES), f"backend imported {loaded & set(UI_MODULES)}"


def test_cli_imports_nothing_heavy_for_help() -> None:
    loaded = _loaded_after("import app.cli\napp.cli.build_parser().format_help()")
    assert not loaded & set(HEAVY_MODULES), f"gemma-chat --help would import {loaded & set(HEAVY_MODULES)}"


def test_help_runs_and_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("ask", "bench", "paths", "make-model", "train-demo"):
        assert command in out.stdout


def _module_graph() -> dict[str, set[str]]:
    """Every import between gemma-chat's own modules — at the top, inside functions and under
    ``TYPE_CHECKING`` alike (a cycle that only type checking sees is still a cycle of concepts)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    files = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for top in ("app", "backend")
        for p in (root / top).rglob("*.py")
    }
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_back_around_a_circle() -> None:
    graph = _module_graph()
    assert "backend.chat.pipeline" in graph and graph["app.tui.turn_runs"], "the graph was read"
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles(graph) == []


def test_no_module_is_over_400_lines_and_each_says_what_it_holds() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in [*root.glob("app/**/*.py"), *root.glob("backend/**/*.py")]:
        text = path.read_text()
        assert len(text.splitlines()) <= 400, f"{path.relative_to(root)} has {len(text.splitlines())} lines"
        doc = ast.get_docstring(ast.parse(text))
        assert doc and doc.strip(), f"{path.relative_to(root)} has no opening line saying what it holds"


ROOMS = (
    "backend.errors",  # the error types everything raises
    "backend.config",  # settings, the folders and the files gemma-chat reads and keeps
    "backend.assets",
    "backend.terminal_text",
    "backend.provenance",
    "backend.gemma4",  # how Gemma 4 speaks: template, messages, replies, calls, declarations
    "backend.media",
    "backend.kernels",
    "backend.lifetime",
    "backend.compat",
    "backend.checkpoints",
    "backend.demo",
    "backend.engine",  # the one door to an engine (protocol), shared values, the platform
    "backend.engine.model",  # the checkpoint, its drafter, what they need in memory
    "backend.engine.gpu",  # the card, its memory plan, window, arguments and attention
    "backend.engine.cpu",  # the CPU's class and environment, KV cache, host memory, processes
    "backend.engine.speculation",  # the speculation choice and its rules, applied at every start
    "backend.engine.paths",  # the paths' values and vLLM arguments, where each goes
    "backend.engine.local",  # vLLM's engine in this process
    "backend.engine.remote",  # a vLLM server as the engine
    "backend.engine.session",  # the app's engines: factory, pool, swap, warm-up
    "backend.engine.probe",  # the runs that start engines to measure them
    "backend.tools",
    "backend.bench",
    "backend.chat",
)
"""The backend's rooms from the bottom up: a module imports from its own room or the ones below."""
PACKAGES = {room.removeprefix("backend.") for room in ROOMS if "." not in room.removeprefix("backend.")}
MAX_LOOSE = 8
MAX_ENGINE_LOOSE = 10


def _room(module: str) -> str:
    return max(
        (room for room in ROOMS if module == room or module.startswith(room + ".")), key=len, default=""
    )


def test_imports_run_down_the_rooms_only() -> None:
    from pathlib import Path

    graph = _module_graph()
    backend = sorted(name for name in graph if name.startswith("backend."))
    assert [name for name in backend if not _room(name)] == [], "every backend module is in a room"
    root = Path(__file__).resolve().parent.parent / "backend"
    loose = sorted(p.stem for p in root.glob("*.py") if p.stem != "__init__")
    assert len(loose) <= MAX_LOOSE, f"the backend's top level holds {len(loose)} loose modules: {loose}"
    engine = sorted(p.stem for p in (root / "engine").glob("*.py") if p.stem != "__init__")
    assert len(engine) <= MAX_ENGINE_LOOSE, f"backend/engine/ holds {len(engine)} loose modules: {engine}"
    upward = [
        f"{name} -> {target}"
        for name in backend
        for target in sorted(graph[name])
        if target.startswith("backend.") and ROOMS.index(_room(target)) > ROOMS.index(_room(name))
    ]
    assert upward == [], "imports that run up: " + "; ".join(upward)
    assert _room("backend.gemma4.reply") == "backend.gemma4" and "chat" in PACKAGES


APP_ROOMS = (
    "app",
    "app.install_output",
    "app.installer",
    "app.bootstrap",
    "app.failure_log",
    "app.tui",
    "app.commands",
    "app.cli",
    "app.__main__",
)
"""The app's rooms from the bottom up: the TUI below the commands that build it, the command line
above them, ``python3 -m app`` on top; every one of them may import the backend."""


def test_the_apps_imports_run_down_its_rooms_too() -> None:
    def room(module: str) -> str:
        return max((r for r in APP_ROOMS if module == r or module.startswith(r + ".")), key=len, default="")

    graph = _module_graph()
    app = sorted(name for name in graph if name == "app" or name.startswith("app."))
    assert [name for name in app if not room(name)] == [], "every app module is in a room"
    upward = [
        f"{name} -> {target}"
        for name in app
        for target in sorted(graph[name])
        if target.startswith("app") and APP_ROOMS.index(room(target)) > APP_ROOMS.index(room(name))
    ]
    assert upward == [], "imports that run up: " + "; ".join(upward)
