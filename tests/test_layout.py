"""The package's shape: imports run downhill (no cycles, counting imports inside functions too, and none of the
uphill arrows named in UPHILL), no module uses another module's private name, every module's file name is used once,
each folder is a package, and the top level holds at most MAX_TOP_LEVEL modules. An import under
``if TYPE_CHECKING:`` names a type for annotations only and never runs, so it is not an arrow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "labmagic"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute module a relative ``from`` names."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) block's body."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return inside


def _imports(module: str, source: str | None = None) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import in ``module`` that runs, at any depth
    (``source``: the module's text, when not the file's)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    skipped = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path.name == "__init__.py", node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((sub, None, node.lineno) if sub in MODULES else (base, alias.name, node.lineno))
    return [(m, n, line) for m, n, line in found if m == "labmagic" or m.startswith("labmagic.")]


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module in MODULES:
        edges = set()
        for target, _, _ in _imports(module):
            while target not in MODULES:  # `import labmagic.x.y` names a module; its parents count as that module
                target = target.rpartition(".")[0]
            if target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_module_list_is_the_package():
    assert "labmagic.benchmark.runner" in MODULES and "labmagic.store.schema" in MODULES
    assert len(MODULES) > 40


def test_imports_form_no_cycle():
    # A package's __init__ that re-exports its submodules is a node like any other: `labmagic` itself imports
    # lazily inside functions, which counts here, so the top-level helpers cannot close a loop either.
    graph = _graph()
    graph["labmagic"] = set()  # the root imports everything lazily by design; its importers are what matters
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_a_planted_cycle_is_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


#: Arrows that ran uphill and were cut: (importer, imported). A lower stage must not import these even inside a
#: function; an importer or an imported name ending in ``.*`` covers the package's modules too.
UPHILL = [
    ("labmagic.child.replay", "labmagic.benchmark.*"),  # replay finds a chapter's race by its shape, not its class
    ("labmagic.display.module_report", "labmagic.compiler.resources"),  # Resources names a type only
    ("labmagic.magics.*", "labmagic"),  # the root imports the magics; their setup notes live in runtime
]


def _matches(module: str, pattern: str) -> bool:
    return module == pattern.removesuffix(".*") or (pattern.endswith(".*") and module.startswith(pattern[:-1]))


def _uphill(imports: dict[str, list[tuple[str, str | None, int]]]) -> list[str]:
    """``importer:line imports target`` for every import in ``imports`` (module -> its imports) that UPHILL forbids."""
    return [f"{module}:{line} imports {target}" + (f".{name}" if name else "")
            for module, found in imports.items() for target, name, line in found
            for src, dst in UPHILL if _matches(module, src) and _matches(target, dst)]


def test_no_import_runs_up_a_cut_arrow():
    offences = _uphill({module: _imports(module) for module in MODULES})
    assert not offences, "\n".join(offences)


def test_a_planted_uphill_import_is_found_and_a_type_checking_one_is_not():
    lazy = "def f():\n    from ..benchmark.race import Race\n    return Race\n"
    assert _uphill({"labmagic.child.replay": _imports("labmagic.child.replay", lazy)}) == [
        "labmagic.child.replay:2 imports labmagic.benchmark.race.Race"]
    root = "def load():\n    from .. import SETUP_NOTES\n"
    assert _uphill({"labmagic.magics": _imports("labmagic.magics", root)}) == [
        "labmagic.magics:2 imports labmagic.SETUP_NOTES"]
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..compiler.resources import Resources\n"
    assert _uphill({"labmagic.display.module_report": _imports("labmagic.display.module_report", typed)}) == []
    downhill = "from ..runtime import SETUP_NOTES\nfrom .. import dsl\n"
    assert _uphill({"labmagic.magics": _imports("labmagic.magics", downhill)}) == []


#: The most modules (and packages) directly under labmagic/, __init__ aside.
MAX_TOP_LEVEL = 10


def test_the_top_level_is_small():
    top = sorted(p.stem if p.suffix else p.name for p in PACKAGE.iterdir()
                 if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file())
    modules = [name for name in top if (PACKAGE / f"{name}.py").is_file()]
    assert len(modules) <= MAX_TOP_LEVEL, f"{len(modules)} top-level modules: {', '.join(modules)}"


def test_no_module_imports_another_modules_private_name():
    offences = []
    for module in MODULES:
        for target, name, line in _imports(module):
            if name and name.startswith("_") and not name.startswith("__") and target != module:
                offences.append(f"{module}:{line} imports {target}.{name}")
    assert not offences, "\n".join(offences)


def test_no_module_reaches_into_another_modules_private_attributes():
    offences = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {}  # local name -> labmagic module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", node.level, node.module)
                for alias in node.names:
                    if f"{base}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                offences.append(f"{module}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not offences, "\n".join(offences)


def test_each_file_name_is_used_once():
    names: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if path.name not in ("__init__.py", "__main__.py"):
            names.setdefault(path.stem, []).append(module)
    folders = {p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    clashes = {name: mods for name, mods in names.items() if len(mods) > 1 or name in folders}
    assert not clashes, clashes


@pytest.mark.parametrize("folder", sorted(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"))
def test_every_folder_is_a_package(folder):
    assert (folder / "__init__.py").is_file(), f"{folder} has no __init__.py (setuptools would not ship it)"


def test_the_linter_passes():
    """``ruff check`` as configured in pyproject.toml, over the package, the tests and the benchmarks."""
    import shutil
    import subprocess
    import sys

    root = PACKAGE.parent
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.fail("ruff is not installed: it comes with the [test] extra (pip install -e '.[test]')")
    proc = subprocess.run([ruff, "check", "--output-format", "concise", "labmagic", "tests", "benchmarks",
                           "conftest.py"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
