"""The package layout holds: front doors (cli/) over the library, never the other way round."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "longread"


def imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                names.add(".".join([*base, node.module] if node.module else base))
            elif node.module:
                names.add(node.module)
    return names


def library_modules() -> list[Path]:
    # __main__.py is `python -m longread`: a front door, like cli/.
    return [
        p
        for p in PACKAGE.rglob("*.py")
        if "cli" not in p.relative_to(PACKAGE).parts and p.name != "__main__.py"
    ]


def test_no_library_module_imports_click_or_the_cli():
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            name for name in imported_modules(path)
            if name.split(".")[0] == "click" or name.startswith("longread.cli")
        )
        for path in library_modules()
    }  # fmt: skip
    assert {k: v for k, v in offenders.items() if v} == {}


def test_data_knows_no_evaluation_and_agents_know_no_benchmark():
    for package, forbidden in (("data", "longread.eval"), ("agents", "longread.data")):
        for path in (PACKAGE / package).rglob("*.py"):
            bad = [n for n in imported_modules(path) if n.startswith(forbidden)]
            assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_the_tree_has_the_documented_packages():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert {"cli", "data", "eval", "agents", "llm", "text"} <= packages
