"""Imports flow one way (docs/ARCHITECTURE.md): a lower layer never imports a higher one, at module level or
inside a function, so no package cycle can come back unnoticed."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("matcher", "topologies", "network", "sharing", "peers", "reports", "streamglobe", "bench", "run")
"""Lowest first; ``run`` is run.py, the command line on top of everything."""
EXCEPTIONS: dict[tuple[str, str], str] = {}
"""(importing module, imported module) -> why this upward import is allowed.  None is needed today."""


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module an ``import from`` names, relative ones resolved against ``module`` (the importer)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def imports(path: Path, root: Path) -> list[tuple[int, str, str]]:
    """Every module ``path`` imports: (line, module, where), ``where`` being ``module level`` or the
    function it is imported in; ``importlib.import_module`` and ``__import__`` of a literal name count."""
    module = _module_name(path, root)
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = f"inside {node.name}()"
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, where) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, _absolute(module, path, node), where))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value, where))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), "at module level")
    return found


def layer_of(module: str) -> int | None:
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def sources(root: Path) -> list[Path]:
    """Every Python file of the layers (run.py included), in a stable order."""
    files = [p for layer in LAYERS[:-1] for p in sorted((root / layer).rglob("*.py"))]
    return [*files, root / "run.py"] if (root / "run.py").exists() else files


def violations(root: Path, exceptions: dict[tuple[str, str], str]) -> list[str]:
    """One line per import of a higher layer by a lower one (not among ``exceptions``)."""
    lines = []
    for path in sources(root):
        importer = _module_name(path, root)
        own = layer_of(importer)
        for line, imported, where in imports(path, root):
            theirs = layer_of(imported)
            if theirs is None or theirs <= own or (importer, imported) in exceptions:
                continue
            lines.append(
                f"{path.relative_to(root)}:{line}: {importer} ({LAYERS[own]}) imports {imported}"
                f" ({LAYERS[theirs]}) {where}: a lower layer never imports a higher one"
                f" (order: {' < '.join(LAYERS)})"
            )
    return lines


def test_no_layer_imports_a_higher_one():
    found = violations(ROOT, EXCEPTIONS)
    assert not found, "\n".join(found)


def test_every_recorded_exception_is_still_an_upward_import_that_happens():
    happening = {
        (_module_name(path, ROOT), imported) for path in sources(ROOT) for _, imported, _ in imports(path, ROOT)
    }
    for (importer, imported), reason in EXCEPTIONS.items():
        assert reason and (importer, imported) in happening, (importer, imported)
        assert layer_of(imported) > layer_of(importer), (importer, imported)


def test_every_package_of_ours_has_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(LAYERS[:-1])


def test_the_architecture_document_states_this_order():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    # the first column of the layers' table, lowest first (a package's sub-packages share its row's layer)
    stated = re.findall(r"^\| `(\w+)(?:/|\.py)` \|", text, re.MULTILINE)
    assert tuple(stated) == LAYERS


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("matcher/bad.py", "from peers.local import run_local\n", "matcher.bad (matcher) imports peers.local (peers)"),
        ("network/bad.py", "def f():\n    import reports.report\n", "imports reports.report (reports) inside f()"),
        ("sharing/bad.py", "import importlib\nimportlib.import_module('bench.engine')\n", "imports bench.engine"),
        ("peers/live/bad.py", "from ...reports import live\n", "peers.live.bad (peers) imports reports (reports)"),
        ("bench/bad.py", "import run\n", "bench.bad (bench) imports run (run) at module level"),
    ],
)
def test_an_upward_import_is_reported_with_its_file_line_and_place(tmp_path, where, source, expected):
    for layer in LAYERS[:-1]:
        (tmp_path / layer).mkdir()
        (tmp_path / layer / "__init__.py").write_text("")
    os.makedirs((tmp_path / where).parent, exist_ok=True)
    (tmp_path / where).write_text(source)
    (tmp_path / "run.py").write_text("import bench\nimport matcher\n")
    [line] = violations(tmp_path, {})
    assert line.startswith(f"{where}:") and expected in line, line
    assert violations(tmp_path, {(line.split(" ")[1], line.split(" imports ")[1].split(" ")[0]): "allowed"}) == []
