"""The tree's shape, as docs/architecture.md draws it: no import cycles among the platform's
modules, the core importing no pipeline, job or service, and no file or function too long to
read (a function's budget is its own: code is split by what it does, not moved between files
to fit a file's cap).

Imports are read from the source (`ast`), at module level and inside functions alike (a
lazy import is a dependency too, only a later one), `if TYPE_CHECKING:` ones included, and
so is a string that names a module's attribute ("conceptual.x.y:attr", what importlib
would resolve): a table that names code by strings depends on that code all the same. A
family's folder depends on its train module, which Family.recipe imports by name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

# Where each package's source lives (setup.py's PACKAGE_DIRS, less the demo's).
PACKAGE_DIRS = {
    "conceptual": "platform/conceptual",
    "conceptual.pipelines": "pipelines",
    "conceptual.jobs": "jobs",
    "conceptual.serve": "serve",
}
OUTER_LAYERS = ("conceptual.pipelines", "conceptual.jobs", "conceptual.serve")
MAX_LINES = 600
MAX_FUNCTION_LINES = 80  # its docstring and comments included


def source_files() -> dict[str, Path]:
    """Every module by its import name."""
    modules = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


MODULES = source_files()
# A string that names code, as an importlib lookup reads it: "module.path:attribute".
REFERENCE = re.compile(r"(conceptual(?:\.\w+)+):\w+")


def imported(module: str, path: Path) -> set[str]:
    """The platform's modules that `module` imports, and the packages they are in: `from x
    import y` is module x.y when that is a module, x otherwise."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = REFERENCE.fullmatch(node.value)
            names = [named[1]] if named and named[1] in MODULES else []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{alias.name}" for alias in node.names]
            names = [name if name in MODULES else base for name in names]
        else:
            continue
        for name in names:
            # Importing a module runs its packages' __init__ first (but for the importer's own).
            parts = name.split(".")
            found.update(
                outer
                for outer in (".".join(parts[:n]) for n in range(1, len(parts) + 1))
                if outer in MODULES and not f"{module}.".startswith(f"{outer}.")
            )
    return found


def family_edges() -> dict[str, set[str]]:
    """Each family's folder -> the modules Family imports from it by its jobs' names
    (conceptual.pipelines.families.family): its train module (Family.recipe) and its
    evaluate module where it has one (Family.evaluate; a family that runs as another uses
    that one's): imports the source spells as no import statement."""
    from conceptual.pipelines.families import FAMILIES

    return {
        f.folder.__name__: {
            f"{f.folder.__name__}.{job}" for verb, job in f.jobs.items() if verb != "compare"
        }
        & set(MODULES)
        for f in FAMILIES.values()
    }


GRAPH = {module: imported(module, path) for module, path in MODULES.items()}
for _folder, _modules in family_edges().items():
    GRAPH[_folder] |= _modules


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module
    (Tarjan's algorithm), as the modules in import order, the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, component) for component in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest way from the component's first module back to itself."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle in {component}")


def test_the_graph_sees_every_package():
    assert {
        "conceptual",
        "conceptual.pipelines.curation.curation",
        "conceptual.jobs.curate",
    } <= set(GRAPH)
    assert "conceptual.serve.app" in GRAPH
    # a submodule named in `from package import submodule` is that module
    assert "conceptual.text.hypernymize.registry" in GRAPH["conceptual.text.hypernymize.sentences"]


def test_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]


def test_a_string_naming_code_is_an_import(tmp_path):
    source = tmp_path / "table.py"
    source.write_text('RECIPE = "conceptual.pipelines.pipeline:TABLE"\nNOTE = "a: b"\n')
    assert imported("conceptual.table", source) == {
        "conceptual.pipelines",
        "conceptual.pipelines.pipeline",
    }


def test_every_familys_train_module_is_in_the_graph():
    from conceptual.pipelines.families import FAMILIES

    edges = family_edges()
    assert edges["conceptual.pipelines.families.attend"] == {
        "conceptual.pipelines.families.attend.train_attend"
    }
    assert (
        "conceptual.pipelines.families.retriever.evaluate_retriever"
        in (edges["conceptual.pipelines.families.retriever"])
    )
    for family in FAMILIES.values():
        assert f"{family.folder.__name__}.{family.jobs['train']}" in edges[family.folder.__name__]


def test_no_import_cycles():
    found = [" -> ".join(cycle) for cycle in cycles(GRAPH)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_core_imports_no_pipeline_job_or_service():
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(GRAPH.items())
        if not module.startswith(OUTER_LAYERS)
        for target in sorted(targets)
        if target.startswith(OUTER_LAYERS)
    ]
    assert not wrong, "\n".join(wrong)


def test_pipelines_import_no_job_or_service():
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(GRAPH.items())
        if module.startswith("conceptual.pipelines")
        for target in sorted(targets)
        if target.startswith(("conceptual.jobs", "conceptual.serve"))
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("folder", ["platform", "pipelines", "jobs", "serve"])
def test_no_file_is_over_600_lines(folder):
    long = {
        str(path.relative_to(REPO)): n
        for path in sorted((REPO / folder).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines (split them by responsibility): {long}"


def own_lines(function: ast.AST) -> int:
    """A function's lines, less those of the functions and classes defined inside it (each of
    them is measured on its own: a closure-built app is not one long function)."""
    inner = set()
    for node in ast.walk(function):
        if node is not function and isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            inner |= set(range(node.lineno, node.end_lineno + 1))
    return len(set(range(function.lineno, function.end_lineno + 1)) - inner)


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def test_a_functions_own_lines_leave_out_what_it_defines():
    (outer,) = ast.parse("def f():\n    x = 1\n    def g():\n        return 2\n    return g\n").body
    assert own_lines(outer) == 3


@pytest.mark.parametrize("folder", ["platform", "pipelines", "jobs", "serve", "demo"])
def test_no_function_is_over_80_lines(folder):
    long = {
        f"{path.relative_to(REPO)}:{node.lineno} {node.name}": n
        for path in sorted((REPO / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, FUNCTIONS) and (n := own_lines(node)) > MAX_FUNCTION_LINES
    }
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them by step): {long}"


def test_params_are_logged_through_the_one_redacting_function():
    """tracking.log_params hides the credentials of any URL in a param; a job calling
    MLflow's own would log `s3://key:secret@...` as it is."""
    direct = re.compile(r"\bmlflow\.log_params?\(")
    calls = [
        str(path.relative_to(REPO))
        for folder in ("platform", "pipelines", "jobs", "serve", "demo")
        for path in sorted((REPO / folder).rglob("*.py"))
        if direct.search(path.read_text()) and path != REPO / "platform/conceptual/tracking.py"
    ]
    assert not calls, f"log params with conceptual.tracking.log_params: {calls}"
