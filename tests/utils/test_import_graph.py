"""Imports point one way: utils <- layers <- models <- training/export/
analysis, and data_pipeline <- training; no cycle between packages or
modules; layers and models reach no absl."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("tupe_tf", "data_pipeline")

# What each package may import from the project (besides itself).
ALLOWED = {
    "tupe_tf.utils": set(),
    "tupe_tf.layers": {"tupe_tf.utils"},
    "tupe_tf.models": {"tupe_tf.utils", "tupe_tf.layers", "tupe_tf.version"},
    "data_pipeline": {"tupe_tf.utils"},
}


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_modules():
    return {
        module_name(path): path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }


def imported_names(path):
    """Every module name `path` imports (at any level of the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def imports_of(path, known):
    """The project modules `path` imports."""
    return {name for name in imported_names(path) if name in known}


def package_of(module):
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "tupe_tf" else parts[0]


@pytest.fixture(scope="module")
def graph():
    modules = project_modules()
    return {name: imports_of(path, modules) for name, path in modules.items()}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_it_may(graph, package):
    offending = {
        (module, imported)
        for module, imports in graph.items()
        if package_of(module) == package
        for imported in imports
        if package_of(imported) not in ALLOWED[package] | {package}
    }
    assert not offending


def reachable(graph, start):
    """`start` and every project module it imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
            # Importing `a.b.c` runs the packages `a` and `a.b` first.
            parts = module.split(".")
            todo.extend(
                ".".join(parts[:i])
                for i in range(1, len(parts))
                if ".".join(parts[:i]) in graph
            )
    return seen


@pytest.mark.parametrize("package", ["tupe_tf.layers", "tupe_tf.models"])
def test_layers_and_models_reach_no_absl(graph, package):
    modules = project_modules()
    importing_absl = {
        module
        for module in reachable(graph, package)
        if any(
            name.split(".")[0] == "absl"
            for name in imported_names(modules[module])
        )
    }
    assert not importing_absl


def find_cycle(edges):
    """A cycle of `edges` (dict node -> set of nodes) as a list, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for successor in sorted(edges.get(node, ())):
            if state.get(successor) == "open":
                return path[path.index(successor) :] + [successor]
            if successor not in state:
                cycle = visit(successor, path + [successor])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [
        "a",
        "b",
        "c",
        "a",
    ]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_level_import_cycle(graph):
    # A package's __init__ re-exporting its modules is not a cycle.
    edges = {
        module: {
            i for i in imports if not module.startswith(f"{i}.") and i != module
        }
        for module, imports in graph.items()
    }
    assert find_cycle(edges) is None


def test_no_package_level_import_cycle(graph):
    edges = {}
    for module, imports in graph.items():
        edges.setdefault(package_of(module), set()).update(
            package_of(i)
            for i in imports
            if package_of(i) != package_of(module)
        )
    # The top-level tupe_tf package only re-exports the models.
    edges.pop("tupe_tf", None)
    assert find_cycle(edges) is None
