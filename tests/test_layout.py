"""The package's layering: no import cycle between its modules (parsed with ``ast``).

Only module-level imports make the graph: an import inside a function runs when the
function is called, after every module has loaded. Function-level imports of the
package's own modules are listed in ``FUNCTION_LEVEL`` with the reason each is one,
so a new one (often a cycle hidden from the graph) is a decision, not an accident.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "lswmkc_dask"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


def _modules():
    """Module name -> path of every module of the package."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(module, node):
    """The package modules an ``import``/``from ... import`` in ``module`` loads."""
    is_package = MODULES[module].name == "__init__.py"
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = set()
    for alias in node.names:  # `from . import steps` loads the submodule; `from .io import x`, the package
        sub = f"{target}.{alias.name}"
        out.add(sub if sub in MODULES else target)
    out &= set(MODULES)
    if not out and target.startswith(PACKAGE):
        raise AssertionError(f"{module}: cannot resolve import of {target}")
    return {t for t in out if t != module}


def _imports(module):
    """(module-level imports, {(function, imported module)}) of ``module``."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    top, inner = set(), set()

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, getattr(child, "name", "<lambda>") if function is None else function)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                targets = _resolve(module, child)
                if function is None:
                    top.update(targets)
                else:
                    inner.update((function, t) for t in targets)
            else:
                visit(child, function)

    visit(tree, None)
    return top, inner


def _graph():
    return {m: _imports(m)[0] for m in MODULES}


def _cycles(graph):
    """Every elementary cycle's representative: one per strongly connected component."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(_one_cycle(graph, sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _one_cycle(graph, comp):
    """A shortest cycle through the component's first module, as a list of names."""
    start, members = comp[0], set(comp)
    paths, seen = [[start]], {start}
    while paths:
        nxt = []
        for path in paths:
            for w in sorted(graph[path[-1]] & members):
                if w == start:
                    return [*path, start]
                if w not in seen:
                    seen.add(w)
                    nxt.append([*path, w])
        paths = nxt
    return comp


def test_cycle_finder_names_a_cycle():
    """The checker itself finds and names a cycle (so a pass means no cycle, not a blind test)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles between modules of the package:\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )


#: Function-level imports of the package's own modules, (module, imported) -> reason.
#: New ones fail :func:`test_function_level_imports_are_listed`; remove an entry once
#: its import moves to the top of the module.
_CLI_COST = "cli: start-up cost (`lswmkc --help` and argument errors load no Dask, zarr or scikit-learn)"
FUNCTION_LEVEL = {
    ("cli", "baselines"): _CLI_COST,
    ("cli", "cluster"): _CLI_COST,
    ("cli", "compare"): _CLI_COST,
    ("cli", "_grid"): _CLI_COST,
    ("cli", "datasets"): _CLI_COST,
    ("cli", "estimator"): _CLI_COST,
    ("cli", "io"): _CLI_COST,
    ("cli", "io.atomic"): _CLI_COST,
    ("cli", "io.integrity"): _CLI_COST,
    ("cli", "io.locks"): _CLI_COST,
    ("cli", "kernels"): _CLI_COST,
    ("cli", "plots"): _CLI_COST + "; plots needs the optional matplotlib",
    ("cli", "tables"): _CLI_COST,
    ("cli", "report"): _CLI_COST,
    ("cli", "solver"): _CLI_COST,
    ("cli", "steps"): _CLI_COST,
    ("cli", "sweep"): _CLI_COST,
    ("fit", "_device_fit"): "cycle: _device_fit builds fit's LSWMKCResult; fit takes it only for FitOptions.resident",
}


def test_function_level_imports_are_listed():
    """Every import of a package module inside a function is listed with its reason."""
    found = set()
    for module in MODULES:
        for _function, target in _imports(module)[1]:
            found.add((module.removeprefix(PACKAGE + "."), target.removeprefix(PACKAGE + ".")))
    unlisted = sorted(found - set(FUNCTION_LEVEL))
    assert not unlisted, (
        "imports inside functions not in tests/test_layout.py FUNCTION_LEVEL (move them to the top of the "
        "module, or list them with the reason): " + ", ".join(f"{m} -> {t}" for m, t in unlisted)
    )
    stale = sorted(set(FUNCTION_LEVEL) - found)
    assert not stale, "FUNCTION_LEVEL lists imports that are no longer inside functions: " + ", ".join(
        f"{m} -> {t}" for m, t in stale)


# --- type hints of the public API ----------------------------------------------------

#: Modules whose public functions are not all annotated yet (to shrink; a module listed
#: here once complete fails the test below, so the list stays true).
_ANNOTATIONS_TO_DO: set[str] = set()


def _unannotated(path):
    """``name: [parameters without annotation, "return"]`` of the functions in ``__all__``."""
    tree = ast.parse(path.read_text())
    exported = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            exported = set(ast.literal_eval(node.value))
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in exported:
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
            missing = [p.arg for p in params if p.annotation is None]
            if node.returns is None:
                missing.append("return")
            if missing:
                out[node.name] = missing
    return out


def test_annotation_finder():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.py"
        path.write_text('__all__ = ["f", "g"]\n\ndef f(a: int, *b, c=1) -> int: ...\n\ndef g(x: int): ...\n\n'
                        "def h(y): ...\n")
        assert _unannotated(path) == {"f": ["c", "b"], "g": ["return"]}


def test_public_functions_are_annotated():
    """Every function in a module's ``__all__`` annotates its parameters and return."""
    problems = {}
    for module, path in MODULES.items():
        missing = _unannotated(path)
        if module in _ANNOTATIONS_TO_DO:
            assert missing, f"{module} is fully annotated now: remove it from _ANNOTATIONS_TO_DO"
        elif missing:
            problems[module] = missing
    assert not problems, problems
