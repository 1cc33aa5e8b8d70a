"""A rendered package's modules and which of them each file imports (tests/test_generated_suites.py
picks the tests a sampler can change by them; tests/test_rendering.py checks that imports run downward)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import PACKAGE


def module_name(package: Path, path: Path) -> str:
    """A module's dotted name inside the package (`data.loader`; a folder's __init__: `data`)."""
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(package: Path) -> dict[str, Path]:
    return {module_name(package, p): p for p in package.rglob("*.py")}


def package_imports(path: Path, package: Path, modules: set[str]) -> set[str]:
    """The modules of the package that a file imports (`from myexp.data import x`, `from myexp.data.x
    import y`, `from .x`, `from ..harness import y`), resolved against the file's place in the package."""
    here = module_name(package, path).split(".") if package in path.parents else []
    if path.name != "__init__.py" and here:
        here = here[:-1]  # a module's relative imports start from its folder
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        found |= imported_modules(node, here, modules)
    return found


def imported_modules(node: ast.AST, here: list[str], modules: set[str]) -> set[str]:
    """The modules of the package that one statement imports (none but for an import of the package);
    `here`: the folder, as a module name's parts, that a relative import starts from."""
    found = set()
    if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == PACKAGE):
        if node.level:
            base = here[: len(here) - (node.level - 1)] + ((node.module or "").split(".") if node.module else [])
        else:
            base = node.module.split(".")[1:]
        base_name = ".".join(base)
        named = {f"{base_name}.{a.name}".lstrip(".") for a in node.names} & modules
        found |= named or ({base_name} & modules)
    elif isinstance(node, ast.Import):
        found |= {a.name.removeprefix(f"{PACKAGE}.") for a in node.names if a.name.startswith(f"{PACKAGE}.")}
    return found & modules
