"""The import rules of the layout (docs/architecture.md), read from the source with `ast`,
nothing imported:

- no import cycle between modules of streamdissect/;
- no face imports another face (the CLI excepted: it is the command line of every face);
- the core (everything that is not a face) imports no face;
- the pipeline below the faces (capture, tcp, framing, engine, tables, analysis) imports no
  protocol package by name (`streamdissect.protocols.<name>`): it asks the registry
  (`streamdissect.protocols.registry`).

Every import counts: at module level, in a function, under `if TYPE_CHECKING:`, and
`importlib.import_module("streamdissect...")` with a literal name; importing `a.b.c` also
runs the package `a.b` first (its __init__), unless the importer is inside it. A failure
names each offending import by file and line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "streamdissect"
FACES = ("cli", "scapy", "spark", "probe", "report", "wireshark")
PIPELINE = ("capture", "tcp", "framing", "engine", "tables", "analysis")
# The face that may import the others: each of its subcommands is another face's command.
COMMAND_LINE = "cli"
# Entry points that are the command line itself (`python -m streamdissect`).
ENTRY_POINTS = {"streamdissect.__main__": COMMAND_LINE}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (a package when the name is not a module of ours)
    path: str  # the importing file, relative to the repository
    line: int
    via: str = ""  # target is a package whose __init__ runs to import this module of it

    def __str__(self) -> str:
        shown = f"{self.path}:{self.line}: {self.source} imports {self.target}"
        return f"{shown} (its __init__, to import {self.via})" if self.via else shown


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `root` (a package directory)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(root: Path) -> list[Import]:
    """Every import of a module of `root` by a module of `root`."""
    known = modules(root)
    top = root.name
    found = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        shown = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, package):
                if target == top or target.startswith(top + "."):
                    resolved = _resolve(target, known)
                    for package in _packages_run(resolved, name):
                        found.append(Import(name, package, shown, node.lineno, resolved))
                    if resolved != name:
                        found.append(Import(name, resolved, shown, node.lineno))
    return found


def _packages_run(target: str, source: str) -> list[str]:
    """The packages whose __init__ an import of `target` runs first: its parents but the
    root and those of `source` (already run when `source` runs)."""
    parts = target.split(".")
    parents = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in parents if not (source == p or source.startswith(p + "."))]


def _targets(node: ast.AST, package: str) -> list[str]:
    """The dotted names an import node loads (`from a import b`: a.b, which _resolve makes
    `a` when b is no module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: from the importing module's package upwards
            parent = package.split(".")
            parent = parent[: len(parent) - (node.level - 1)]
            base = ".".join([*parent, *([base] if base else [])])
        return [f"{base}.{alias.name}" for alias in node.names]
    if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in ("import_module", "__import__") and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def _resolve(target: str, known: dict[str, Path]) -> str:
    """The longest prefix of `target` that is a module of ours."""
    parts = target.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts)


def _dedupe(found: list[Import]) -> list[Import]:
    """One edge per (source, target, line): `from a import b, c` names `a` once."""
    seen: set[tuple[str, str, int]] = set()
    kept = []
    for imp in found:
        key = (imp.source, imp.target, imp.line)
        if key not in seen:
            seen.add(key)
            kept.append(imp)
    return kept


def layer(module: str) -> str:
    """The top folder of a module under the package ('' for the package's own modules)."""
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def protocol_packages(root: Path) -> set[str]:
    protocols = root / "protocols"
    return {f"{root.name}.protocols.{p.name}" for p in protocols.iterdir()
            if p.is_dir() and (p / "__init__.py").exists()}


# --- the rules --------------------------------------------------------------------------


def cycles(found: list[Import]) -> list[list[Import]]:
    """Import cycles (their imports, in order): within each strongly connected group of
    modules, a shortest cycle through each module."""
    graph: dict[str, list[Import]] = {}
    for imp in found:
        graph.setdefault(imp.source, []).append(imp)
        graph.setdefault(imp.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:  # iterative: no recursion limit on a long chain
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for imp in edges:
                if imp.target not in index:
                    index[imp.target] = low[imp.target] = len(index)
                    stack.append(imp.target)
                    on_stack.add(imp.target)
                    work.append((imp.target, iter(graph[imp.target])))
                    advanced = True
                    break
                if imp.target in on_stack:
                    low[node] = min(low[node], index[imp.target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)

    for node in list(graph):
        if node not in index:
            visit(node)
    found_cycles: list[list[Import]] = []
    for group in groups:  # a shortest cycle through each module, each cycle once
        seen: set[frozenset] = set()
        for start in sorted(group):
            cycle = _shortest_cycle(start, graph, group)
            edges = frozenset((i.source, i.target) for i in cycle)
            if edges not in seen:
                seen.add(edges)
                found_cycles.append(cycle)
    return found_cycles


def _shortest_cycle(start: str, graph: dict[str, list[Import]], group: set[str]) -> list[Import]:
    """The imports of a shortest cycle through `start` within its group (breadth first)."""
    came_by: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for imp in graph[node]:
                if imp.target not in group or imp.target in came_by:
                    continue
                came_by[imp.target] = imp
                if imp.target == start:
                    path = [imp]
                    while path[-1].source != start:
                        path.append(came_by[path[-1].source])
                    return path[::-1]
                following.append(imp.target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # (a group always has one)


def face_imports(found: list[Import]) -> list[Import]:
    """A face importing another face (but the command line), or the core importing a face."""
    bad = []
    for imp in found:
        if imp.via:  # (the import of the module itself is judged)
            continue
        source, target = layer(imp.source), layer(imp.target)
        if target in FACES and source != target and source != COMMAND_LINE:
            bad.append(imp)
    return bad


def protocol_imports(found: list[Import], packages: set[str]) -> list[Import]:
    """The pipeline below the faces importing a protocol package by name."""
    return [imp for imp in found if layer(imp.source) in PIPELINE and not imp.via
            and any(imp.target == p or imp.target.startswith(p + ".") for p in packages)]


def _report(title: str, lines: list[str]) -> str:
    return title + ":\n  " + "\n  ".join(lines)


# --- the tests over streamdissect/ ------------------------------------------------------

FOUND = _dedupe(imports(PACKAGE))


def test_the_reader_sees_the_imports():
    """(the rules below would pass on nothing: the reader must find what is there)"""
    edges = {(imp.source, imp.target) for imp in FOUND}
    assert ("streamdissect.engine.stream", "streamdissect.engine.state") in edges
    assert ("streamdissect.cli.__main__", "streamdissect.cli") in edges
    assert len(FOUND) > 300


def test_no_import_cycle():
    found = cycles(FOUND)
    assert not found, "\n".join(
        _report("import cycle", [str(i) for i in cycle]) for cycle in found)


def test_faces_import_no_other_face_and_the_core_no_face():
    bad = face_imports(FOUND)
    assert not bad, _report("a face (or the core) importing a face", [str(i) for i in bad])


def test_pipeline_imports_no_protocol_by_name():
    bad = protocol_imports(FOUND, protocol_packages(PACKAGE))
    assert not bad, _report("the pipeline importing a protocol package instead of asking "
                            "streamdissect.protocols.registry", [str(i) for i in bad])


# --- the rules fire (a small package written for the test) ------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> list[Import]:
    root = tmp_path / "streamdissect"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(tmp_path).parents:
            init = tmp_path / parent / "__init__.py"
            if parent.name and not init.exists():
                init.write_text("")
        path.write_text(text)
    return _dedupe(imports(root))


def test_a_cycle_is_found_and_named(tmp_path):
    found = _package(tmp_path, {
        "engine/a.py": "from streamdissect.engine.b import x\n",
        "engine/b.py": "def f():\n    from streamdissect.engine import c\n",
        "engine/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    import streamdissect.engine.a\n",
        "engine/d.py": "from streamdissect.engine.a import x\n",
    })  # fmt: skip
    (cycle,) = cycles(found)
    assert [str(i) for i in cycle] == [
        "streamdissect/engine/a.py:1: streamdissect.engine.a imports streamdissect.engine.b",
        "streamdissect/engine/b.py:2: streamdissect.engine.b imports streamdissect.engine.c",
        "streamdissect/engine/c.py:3: streamdissect.engine.c imports streamdissect.engine.a",
    ]


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    """Importing analysis.fields runs analysis/__init__, which imports the driver: a cycle
    when the driver imports the importer (not when a module of the package imports another)."""
    found = _package(tmp_path, {
        "analysis/__init__.py": "from streamdissect.analysis.driver import analyze\n"
                                "from streamdissect.analysis.tables import table\n",
        "analysis/driver.py": "from streamdissect.protocols.stream.collect import c\n",
        "analysis/tables.py": "from streamdissect.analysis.driver import analyze\n",
        "analysis/fields.py": "",
        "protocols/stream/collect.py": "from streamdissect.analysis.fields import get\n",
    })  # fmt: skip
    through_init, through_tables = cycles(found)
    assert str(through_tables[0]) == (
        "streamdissect/analysis/tables.py:1: streamdissect.analysis.tables imports "
        "streamdissect.analysis.driver")
    assert [str(i) for i in through_init] == [
        ("streamdissect/analysis/__init__.py:1: streamdissect.analysis imports "
         "streamdissect.analysis.driver"),
        ("streamdissect/analysis/driver.py:1: streamdissect.analysis.driver imports "
         "streamdissect.protocols.stream.collect"),
        ("streamdissect/protocols/stream/collect.py:1: streamdissect.protocols.stream.collect "
         "imports streamdissect.analysis (its __init__, to import streamdissect.analysis.fields)"),
    ]


def test_face_and_protocol_rules_fire(tmp_path):
    found = _package(tmp_path, {
        "spark/submit.py": "from streamdissect.cli import build_parser\n",
        "cli/spark.py": "from streamdissect.spark.submit import x\n",
        "tables/schema.py": "import importlib\nimportlib.import_module('streamdissect.report')\n",
        "report/__init__.py": "",
        "engine/state.py": "from streamdissect.protocols.stream.framing import StreamFramer\n"
                           "from streamdissect.protocols import registry\n",
        "rotated/facts.py": "from streamdissect.protocols.stream import framing\n",
        "protocols/registry.py": "from streamdissect.protocols.stream import STREAM\n",
        "protocols/stream/framing.py": "",
    })  # fmt: skip
    assert [str(i) for i in face_imports(found)] == [
        "streamdissect/spark/submit.py:1: streamdissect.spark.submit imports streamdissect.cli",
        ("streamdissect/tables/schema.py:2: streamdissect.tables.schema imports "
         "streamdissect.report"),
    ]
    packages = protocol_packages(tmp_path / "streamdissect")
    assert [str(i) for i in protocol_imports(found, packages)] == [
        ("streamdissect/engine/state.py:1: streamdissect.engine.state imports "
         "streamdissect.protocols.stream.framing"),
    ]
