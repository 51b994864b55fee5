"""House rules of the installed package, checked on its source with ``ast``.

- no import cycle among the modules, counting the imports that run when a module is
  imported (module level, not under ``if TYPE_CHECKING:``);
- nothing in ``trustroute.router`` or ``trustroute.profiles`` imports
  ``trustroute.integrations``, not even inside a function or for type checking;
- no Python file of the repository over 400 lines (the package, tests, benchmarks,
  examples);
- one installed top-level name, ``trustroute``: the package list in pyproject.toml names
  only ``trustroute`` and its subpackages (every one of them), and no module imports
  its siblings by a bare top-level name (``router``, ``profiles``, ...).
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "trustroute"
SUBPACKAGES = ("router", "profiles", "integrations")
MAX_LINES = 400
#: a string that names a module of ours by import path (``pkg.mod`` or ``pkg.mod:attr``)
MODULE_PATH = re.compile(r"trustroute(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?")


@dataclass(frozen=True, slots=True)
class Edge:
    """One import: the module it names, and whether it runs when the importer is imported."""

    target: str
    at_import_time: bool
    line: int


@dataclass(slots=True)
class Module:
    name: str
    path: Path
    is_package: bool
    lines: int
    edges: list[Edge] = field(default_factory=list)
    bare_imports: list[tuple[str, int]] = field(default_factory=list)  # (name, line)
    named: list[tuple[str, int]] = field(default_factory=list)  # module paths in strings


def module_name(path: Path, root: Path = ROOT) -> tuple[str, bool]:
    """The dotted name a source file is installed as, and whether it is a package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts]), is_package


def source_files(root: Path = ROOT) -> Iterator[Path]:
    yield root / "__init__.py"
    for sub in SUBPACKAGES:
        for path in sorted((root / sub).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


ImportNode = ast.Import | ast.ImportFrom | ast.Call


def imports(tree: ast.Module) -> Iterator[tuple[ImportNode, bool]]:
    """Every import-like node with whether it runs at import time.

    Function bodies run later; ``if TYPE_CHECKING:`` bodies never run (their ``else``
    does); class bodies and any other block run at import time.
    """

    def walk(node: ast.AST, runtime: bool) -> Iterator[tuple[ImportNode, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Call):
            yield node, runtime
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            runtime = False
        if isinstance(node, ast.If) and is_type_checking(node.test):
            yield from walk(node.test, runtime)
            for stmt in node.body:
                yield from walk(stmt, False)
            for stmt in node.orelse:
                yield from walk(stmt, runtime)
            return
        for child in ast.iter_child_nodes(node):
            yield from walk(child, runtime)

    yield from walk(tree, True)


def docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring nodes of the module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                      | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def dynamic_import_name(call: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("...")`` or ``__import__("...")``
    (the literal part of an f-string: up to its first placeholder)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        first = arg.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.rstrip(".")
    return None


def resolve_relative(module: Module, level: int, name: str | None) -> str:
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, name] if name else base)


@cache
def graph(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the package under ``root`` with the imports it makes."""
    modules: dict[str, Module] = {}
    trees: dict[str, ast.Module] = {}
    for path in source_files(root):
        name, is_package = module_name(path, root)
        text = path.read_text(encoding="utf-8")
        modules[name] = Module(name, path, is_package, len(text.splitlines()))
        trees[name] = ast.parse(text, filename=str(path))

    def known(dotted: str) -> str | None:
        """The longest prefix of ``dotted`` that is one of our modules."""
        parts = dotted.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in modules:
                return candidate
            parts.pop()
        return None

    for name, tree in trees.items():
        module = modules[name]
        skip = docstrings(tree)
        for const in ast.walk(tree):
            if (isinstance(const, ast.Constant) and isinstance(const.value, str)
                    and id(const) not in skip and MODULE_PATH.fullmatch(const.value)):
                module.named.append((const.value, const.lineno))
        for node, runtime in imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (resolve_relative(module, node.level, node.module) if node.level
                        else node.module or "")
                for alias in node.names:
                    # ``from package import submodule`` depends on the submodule itself
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            elif isinstance(node, ast.Call):
                dynamic = dynamic_import_name(node)
                if dynamic is None:
                    continue
                targets = [dynamic]
            for target in targets:
                top = target.split(".")[0]
                if top in SUBPACKAGES:
                    module.bare_imports.append((target, node.lineno))
                resolved = known(target) if top == PACKAGE else None
                if resolved is None and top == PACKAGE and target.startswith(
                        f"{PACKAGE}.integrations"):
                    resolved = target  # a dynamic import below a placeholder
                if resolved is not None and resolved != name:
                    module.edges.append(Edge(resolved, runtime, node.lineno))
    return modules


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """One cycle through each strongly connected group of import-time imports."""
    succ = {name: sorted({e.target for e in m.edges if e.at_import_time and
                          e.target in modules}) for name, m in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def connect(v: str) -> None:  # Tarjan
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in succ[v]:
                groups.append(sorted(group))

    for v in sorted(succ):
        if v not in index:
            connect(v)

    found = []
    for group in groups:  # shortest path from the first module back to itself
        members = set(group)
        start = group[0]
        paths = {w: [start, w] for w in succ[start] if w in members}
        frontier = list(paths)
        while start not in paths:
            step = []
            for v in frontier:
                for w in succ[v]:
                    if w in members and w not in paths:
                        paths[w] = [*paths[v], w]
                        step.append(w)
            frontier = step
        found.append(paths[start])
    return found


def integrations_offenders(modules: dict[str, Module]) -> list[str]:
    """Where router/ or profiles/ import trustroute.integrations (also by import path)."""
    found = []
    for name, module in sorted(modules.items()):
        if not name.startswith(("trustroute.router", "trustroute.profiles")):
            continue
        found += [f"{name} (line {edge.line}) imports {edge.target}" for edge in module.edges
                  if edge.target.startswith("trustroute.integrations")]
        found += [f"{name} (line {line}) names {path} (to import it by name)"
                  for path, line in module.named if path.startswith("trustroute.integrations")]
    return found


def bare_offenders(modules: dict[str, Module]) -> list[str]:
    return [f"{name} (line {line}) imports {target}"
            for name, module in sorted(modules.items()) for target, line in module.bare_imports]


def test_the_graph_sees_every_module_and_resolves_imports() -> None:
    modules = graph()
    assert "trustroute" in modules and "trustroute.router.router" in modules
    assert "trustroute.router.stats" in modules
    public = {e.target for e in modules["trustroute"].edges}
    assert {"trustroute.router", "trustroute.profiles.records"} <= public
    stats_users = [n for n, m in modules.items()
                   if any(e.target == "trustroute.router.stats" for e in m.edges)]
    assert "trustroute.router.trust.scores" in stats_users


def test_no_import_cycles() -> None:
    found = cycles(graph())
    assert not found, "import cycles (at import time):\n" + "\n".join(
        " -> ".join(cycle) for cycle in found)


def test_router_and_profiles_never_import_integrations() -> None:
    offenders = integrations_offenders(graph())
    assert not offenders, "\n".join(offenders)


def repository_files(root: Path = ROOT) -> Iterator[Path]:
    """Every Python file under version control's folders (not the venv or build output)."""
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if not any(part.startswith(".") or part in {"build", "dist"} or part.endswith(
                ".egg-info") for part in parts):
            yield path


def test_no_file_over_400_lines() -> None:
    sizes = {path: len(path.read_text(encoding="utf-8").splitlines())
             for path in repository_files()}
    assert len(sizes) > 100  # the package, tests and benchmarks were all found
    long = [f"{path.relative_to(ROOT)}: {n} lines"
            for path, n in sorted(sizes.items(), key=lambda kv: -kv[1]) if n > MAX_LINES]
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)


def installed_packages() -> tuple[dict[str, str], list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    assert "py-modules" not in setuptools, "top-level modules are installed beside trustroute"
    return dict(setuptools.get("package-dir", {})), list(setuptools["packages"])


def test_only_trustroute_is_installed_at_the_top_level() -> None:
    package_dir, packages = installed_packages()
    assert package_dir == {PACKAGE: "."}
    strays = sorted({p.split(".")[0] for p in packages} - {PACKAGE})
    assert not strays, f"pyproject.toml installs top-level packages besides trustroute: {strays}"


def test_every_package_on_disk_is_installed_and_only_those() -> None:
    _, packages = installed_packages()
    on_disk = {module_name(p)[0] for p in source_files() if p.name == "__init__.py"}
    folders = {module_name(p.parent / "__init__.py")[0] for p in source_files()}
    assert folders == on_disk, f"folders of modules without __init__.py: {folders - on_disk}"
    assert sorted(on_disk - set(packages)) == [], "packages missing from pyproject.toml"
    assert sorted(set(packages) - on_disk) == [], "pyproject.toml lists missing packages"


def test_no_module_imports_a_sibling_by_a_bare_name() -> None:
    bare = bare_offenders(graph())
    assert not bare, "imports that only work if router/profiles/integrations are " \
                     "installed as top-level packages:\n" + "\n".join(bare)


SAMPLE = {  # a small package with each kind of import the rules tell apart
    "__init__.py": "from trustroute.router import a\n",
    "router/__init__.py": "",
    "router/a.py": "from trustroute.router import b\n",  # a submodule, named by from-import
    "router/b.py": "import trustroute.router.a\n",  # a -> b -> a at import time
    "router/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                   "    from trustroute.router import d\nelse:\n    import json\n",
    "router/d.py": "from trustroute.router.c import TYPE_CHECKING\n",  # c -> d is types only
    "router/e.py": "def late():\n    from trustroute.integrations import hooks\n",
    "router/g.py": '"""Hooks live in trustroute.integrations.hooks."""\n'
                   'HOOK = "trustroute.integrations.hooks:Hook"\n',
    "profiles/__init__.py": "",
    "profiles/p.py": "import importlib\n"
                     "class P:\n    from trustroute.profiles import q\n"  # class bodies run
                     "def f(name):\n    return importlib.import_module(f'router.{name}')\n",
    "profiles/q.py": "import trustroute.profiles.p\n",
    "integrations/__init__.py": "",
    "integrations/hooks.py": "from trustroute.router.e import late\n",
}


def test_the_rules_catch_what_they_are_for(tmp_path: Path) -> None:
    for rel, text in SAMPLE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = graph(tmp_path)
    assert sorted(cycles(modules)) == [
        ["trustroute.profiles.p", "trustroute.profiles.q", "trustroute.profiles.p"],
        ["trustroute.router.a", "trustroute.router.b", "trustroute.router.a"],
    ]
    assert integrations_offenders(modules) == [
        "trustroute.router.e (line 2) imports trustroute.integrations.hooks",
        "trustroute.router.g (line 2) names trustroute.integrations.hooks:Hook "
        "(to import it by name)",
    ]
    assert bare_offenders(modules) == ["trustroute.profiles.p (line 5) imports router"]
