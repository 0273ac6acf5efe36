"""The package's layering: no import cycle between its modules (parsed with ``ast``).

Every import of a package module makes an edge of the graph, at the top of a module or
inside a function: a function-level import only defers the load, and a cycle through it
is still a cycle (two modules that need each other). Function-level imports of the
package's own modules are listed in ``FUNCTION_LEVEL`` with the reason each is one
(the command line's start-up cost), so a new one is a decision, not an accident.
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
    for alias in node.names:  # `from . import core` loads the submodule; `from .io import x`, the package
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
    """Module -> the package modules it imports, at its top or inside its functions."""
    graph = {}
    for m in MODULES:
        top, inner = _imports(m)
        graph[m] = top | {target for _function, target in inner}
    return graph


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


def test_imports_inside_functions_make_edges():
    """A function-level import counts: ``_params`` loads ``engine.where`` only inside a function."""
    assert "lswmkc_dask.engine.where" not in _imports("lswmkc_dask._params")[0]
    assert "lswmkc_dask.engine.where" in _graph()["lswmkc_dask._params"]


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
    ("cli._fit", "engine.cluster"): _CLI_COST,
    ("cli._fit", "_validate"): _CLI_COST,
    ("cli._fit", "estimator"): _CLI_COST,
    ("cli._fit", "io"): _CLI_COST,
    ("cli._fit", "report.record"): _CLI_COST,
    ("cli._grids", "engine.cluster"): _CLI_COST,
    ("cli._grids", "grid.compare"): _CLI_COST,
    ("cli._grids", "engine.device_route"): _CLI_COST,
    ("cli._grids", "grid.results"): _CLI_COST,
    ("cli._grids", "grid.sweep"): _CLI_COST,
    ("cli._inputs", "datasets"): _CLI_COST,
    ("cli._inputs", "engine.cluster"): _CLI_COST,
    ("cli._inputs", "engine.route"): _CLI_COST,
    ("cli._inputs", "engine.where"): _CLI_COST,
    ("cli._inputs", "estimator"): _CLI_COST,
    ("cli._inputs", "io"): _CLI_COST,
    ("cli._inputs", "io.output"): _CLI_COST,
    ("cli._inputs", "kernels.features"): _CLI_COST,
    ("cli._outputs", "io.output"): _CLI_COST,
    ("cli._outputs", "io.integrity"): _CLI_COST,
    ("cli._outputs", "io.results"): _CLI_COST,
    ("cli._outputs", "plots"): _CLI_COST + "; plots needs the optional matplotlib",
    ("cli._outputs", "grid.tables"): _CLI_COST,
    ("cli._fit", "predict"): _CLI_COST,
    ("cli._predict", "estimator"): _CLI_COST,
    ("cli._predict", "io.output"): _CLI_COST,
    ("cli._predict", "io.npz"): _CLI_COST,
    ("cli._predict", "report.record"): _CLI_COST,
    ("cli._validate", "_params"): _CLI_COST,
    ("cli._validate", "_validate"): _CLI_COST,
    ("cli._validate", "report.localise"): _CLI_COST,
    ("_params", "core.equations"): _CLI_COST + "; cli imports _params, the table of its options",
    ("_params", "engine.where"): _CLI_COST + "; cli imports _params, the table of its options",
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

def _faces():
    """The faces: every ``__init__.py`` of the package and ``errors.py`` (the modules with ``__all__``)."""
    return {m: p for m, p in MODULES.items() if p.name == "__init__.py" or m == f"{PACKAGE}.errors"}


def _unannotated(functions):
    """``name: [parameters without annotation, "return"]`` of the given functions."""
    import inspect

    out = {}
    for name, f in functions.items():
        sig = inspect.signature(f)
        missing = [p.name for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
        if sig.return_annotation is inspect.Signature.empty:
            missing.append("return")
        if missing:
            out[name] = missing
    return out


def test_annotation_finder():
    def f(a: int, *b, c=1) -> int: ...

    def g(x: int): ...

    assert _unannotated({"f": f, "g": g}) == {"f": ["b", "c"], "g": ["return"]}


def test_public_functions_are_annotated():
    """Every function a face exports (its ``__all__``) annotates its parameters and return."""
    import importlib
    import inspect

    problems = {}
    for module in _faces():
        face = importlib.import_module(module)
        functions = {n: getattr(face, n) for n in getattr(face, "__all__", ()) if inspect.isfunction(getattr(face, n))}
        if missing := _unannotated(functions):
            problems[module] = missing
    assert not problems, problems


# --- size and complexity -------------------------------------------------------------

#: A module holds one job: at most this many code lines (:func:`code_lines`: docstrings,
#: comments and blank lines not counted).
MAX_MODULE_LINES = 450
#: A function's body, in code lines, at most this many.
MAX_FUNCTION_LINES = 60
#: McCabe complexity of a function (ruff's C901, ``max-complexity`` in pyproject.toml).
MAX_COMPLEXITY = 15

#: Modules over :data:`MAX_MODULE_LINES`, module -> reason. A listed module back under
#: the limit fails :func:`test_module_sizes`: remove it from the list then.
LONG_MODULES = {
}

#: Functions over :data:`MAX_FUNCTION_LINES` statement lines or :data:`MAX_COMPLEXITY`,
#: (module, function) -> reason. A listed function back under both limits fails
#: :func:`test_function_sizes`.
LONG_FUNCTIONS = {
}


def _complexity(statements):
    """McCabe complexity of a block, counted as ruff's C901 counts it (the function adds 1).

    A decision point each: ``if``/``elif``, ``for``, ``while``, ``except``, a ``try``'s
    ``else``, a ``match`` case, a nested function; boolean operators and
    comprehensions count nothing.
    """
    count = 0
    for s in statements:
        if isinstance(s, ast.If):
            count += 1 + _complexity(s.body)
            orelse = s.orelse
            while len(orelse) == 1 and isinstance(orelse[0], ast.If):  # elif
                count += 1 + _complexity(orelse[0].body)
                orelse = orelse[0].orelse
            count += _complexity(orelse)
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            count += 1 + _complexity(s.body) + _complexity(s.orelse)
        elif isinstance(s, (ast.With, ast.AsyncWith, ast.ClassDef)):
            count += _complexity(s.body)
        elif isinstance(s, (ast.Try, ast.TryStar)):
            count += _complexity(s.body) + bool(s.orelse) + _complexity(s.orelse) + _complexity(s.finalbody)
            count += sum(1 + _complexity(h.body) for h in s.handlers)
        elif isinstance(s, ast.Match):
            count += sum(1 + _complexity(case.body) for case in s.cases)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            count += 1 + _complexity(s.body)
    return count


def _docstring_lines(tree):
    """Line numbers of every docstring (module, class, function) in ``tree``."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source, first=1, last=None):
    """Code lines of ``source`` between lines ``first`` and ``last``: not docstrings, comments or blanks."""
    tree = ast.parse(source)
    skip = _docstring_lines(tree)
    text = source.splitlines()
    last = len(text) if last is None else last
    return sum(1 for i in range(first, last + 1)
               if i not in skip and text[i - 1].strip() and not text[i - 1].lstrip().startswith("#"))


def _function_measures(source):
    """``{name: (body code lines, complexity)}`` of every function and method in ``source``
    (nested functions count within theirs; the longest of a repeated name)."""
    out = {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = code_lines(source, node.body[0].lineno, node.end_lineno)
            old = out.get(node.name, (0, 0))
            out[node.name] = (max(lines, old[0]), max(_complexity(node.body) + 1, old[1]))
    return out


def test_function_measures():
    """The measures themselves: statement lines without the docstring, complexity as ruff counts it."""
    source = (
        'def f(x):\n    """Doc.\n\n    More.\n    """\n    if x:\n        return 1\n    elif x is None:\n'
        "        return 2\n    for i in x:\n        while i and x:\n            pass\n    try:\n        pass\n"
        "    except ValueError:\n        pass\n    else:\n        pass\n    with open(x):\n"
        "        y = [i for i in x if i]\n    def g():\n        if y:\n            pass\n    return g\n"
    )
    # if, elif, for, while, except, try's else, def g and its if: 8 decision points
    assert _function_measures(source) == {"f": (19, 9), "g": (2, 2)}
    assert code_lines('"""Module."""\n\n# a comment\nx = 1\n\ndef f():\n    """Doc."""\n    return x  # why\n') == 3


def _module_name(path):
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") or "__init__"


def test_module_sizes():
    """No module over :data:`MAX_MODULE_LINES` code lines but those listed with their reason."""
    sizes = {_module_name(p): code_lines(p.read_text()) for p in MODULES.values()}
    over = {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES}
    unlisted = sorted(f"{m} ({n} lines)" for m, n in over.items() if m not in LONG_MODULES)
    assert not unlisted, (f"modules over {MAX_MODULE_LINES} code lines (split them by job, or list them in "
                          f"tests/test_layout.py LONG_MODULES with the reason): " + ", ".join(unlisted))
    stale = sorted(m for m in LONG_MODULES if sizes.get(m, 0) <= MAX_MODULE_LINES)
    assert not stale, "LONG_MODULES lists modules now within the limit (or gone): " + ", ".join(stale)


def test_function_sizes():
    """No function over :data:`MAX_FUNCTION_LINES` lines or :data:`MAX_COMPLEXITY` but those listed."""
    found = {}
    for path in MODULES.values():
        for name, (lines, complexity) in _function_measures(path.read_text()).items():
            if lines > MAX_FUNCTION_LINES or complexity > MAX_COMPLEXITY:
                found[(_module_name(path), name)] = f"{lines} lines, complexity {complexity}"
    unlisted = sorted(f"{m}.{f} ({why})" for (m, f), why in found.items() if (m, f) not in LONG_FUNCTIONS)
    assert not unlisted, (f"functions over {MAX_FUNCTION_LINES} code lines or complexity {MAX_COMPLEXITY} (split "
                          "them into named steps, or list them in tests/test_layout.py LONG_FUNCTIONS with the "
                          "reason): " + ", ".join(unlisted))
    stale = sorted(f"{m}.{f}" for m, f in LONG_FUNCTIONS if (m, f) not in found)
    assert not stale, "LONG_FUNCTIONS lists functions now within the limits (or gone): " + ", ".join(stale)


def test_complexity_limit_is_ruffs():
    """pyproject.toml sets ruff's C901 at :data:`MAX_COMPLEXITY` and ignores it only where
    :data:`LONG_FUNCTIONS` lists a function over the limit."""
    import tomllib

    lint = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "C90" in lint["select"] and lint["mccabe"]["max-complexity"] == MAX_COMPLEXITY
    complex_modules = set()
    for path in MODULES.values():
        for name, (_, complexity) in _function_measures(path.read_text()).items():
            if complexity > MAX_COMPLEXITY and (_module_name(path), name) in LONG_FUNCTIONS:
                complex_modules.add(str(path.relative_to(ROOT.parent)))
    ignored = {pattern for pattern, codes in lint.get("per-file-ignores", {}).items()
               if "C901" in codes and pattern.startswith(PACKAGE)}
    assert ignored <= complex_modules, ("C901 ignored in pyproject.toml for files with no listed function over "
                                        "the limit: " + ", ".join(sorted(ignored - complex_modules)))


def test_mypy_checks_every_module():
    """``[tool.mypy] files`` in pyproject.toml lists every module of the package, and no other file."""
    import tomllib

    listed = set(tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["mypy"]["files"])
    modules = {str(p.relative_to(ROOT.parent)) for p in MODULES.values()}
    assert not modules - listed, "modules mypy does not check (add them to [tool.mypy] files in pyproject.toml): " \
        + ", ".join(sorted(modules - listed))
    assert not listed - modules, "[tool.mypy] files lists files that are not modules of the package: " \
        + ", ".join(sorted(listed - modules))


# --- privacy by module ----------------------------------------------------------------

#: Names exported by the faces (``__all__`` of the ``__init__.py`` files and ``errors.py``), at most.
MAX_PUBLIC_NAMES = 150


def _is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_face(module):
    return MODULES[module].name == "__init__.py" or module == f"{PACKAGE}.errors"


def _declares_all(path):
    return any(isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               and any(getattr(t, "id", None) == "__all__"
                       for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
               for node in ast.parse(path.read_text()).body)


def test_all_only_in_the_faces():
    """``__all__`` is declared only by the faces, which export :data:`MAX_PUBLIC_NAMES` names at most:
    a module's public names are what its subpackage's face exports, and what the documentation names."""
    import importlib

    inner = sorted(m for m, p in MODULES.items() if not _is_face(m) and _declares_all(p))
    assert not inner, "__all__ outside the faces (export from the subpackage's __init__.py): " + ", ".join(inner)
    names = sum(len(importlib.import_module(m).__dict__.get("__all__", ())) for m in MODULES if _is_face(m))
    assert names <= MAX_PUBLIC_NAMES, f"the faces export {names} names, more than {MAX_PUBLIC_NAMES}"


def _crosses(module, target):
    """Whether ``module`` importing ``target`` reaches an underscore module from outside the
    subpackage that holds it (``grid.x`` -> ``plots._base`` does; ``plots._knn`` -> ``plots._base``
    and anything -> the top-level ``_params`` do not)."""
    parts = target.split(".")
    private = [i for i, p in enumerate(parts) if _is_private(p)]
    if not private:
        return False
    holder = ".".join(parts[:private[0]])
    return module != holder and not module.startswith(holder + ".")


def _private_module_imports(module):
    """``(module, target)`` for every import in ``module`` that :func:`_crosses`."""
    top, inner = _imports(module)
    return [(module, t) for t in sorted(top | {t for _f, t in inner}) if _crosses(module, t)]


def test_private_module_finder():
    """The rule itself, so that a pass means no crossing, not a blind check."""
    pk = PACKAGE
    assert _crosses(f"{pk}.grid.x", f"{pk}.plots._base")
    assert _crosses(f"{pk}.cli._fit", f"{pk}.methods._qp")
    assert not _crosses(f"{pk}.plots._knn", f"{pk}.plots._base")
    assert not _crosses(f"{pk}.grid.x", f"{pk}._params")
    assert not _crosses(f"{pk}.grid.x", f"{pk}.grid.points")
    assert not _crosses(f"{pk}.plots", f"{pk}.plots._base")


def test_private_modules_stay_in_their_subpackage():
    """A subpackage's ``_`` module is imported only inside that subpackage (``plots._base`` by
    ``plots``' modules): the underscore marks what no other part of the package may rely on."""
    crossing = sorted(pair for m in MODULES for pair in _private_module_imports(m))
    assert not crossing, "underscore modules imported from outside their subpackage: " + ", ".join(
        f"{m} -> {t}" for m, t in crossing)


def _private_dependency_imports(source):
    """Modules of other packages imported with a private part (``sklearn.utils._param_validation``)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names if _is_private(a.name)]
    return [n for n in names if not n.startswith(PACKAGE) and any(_is_private(p) for p in n.split("."))]


def test_no_private_module_of_a_dependency():
    """No module imports a dependency's private module or name (scikit-learn's
    ``_param_validation`` changes without notice): the package keeps its own."""
    assert _private_dependency_imports("from sklearn.utils._param_validation import Interval\nimport numpy._core\n"
                                       "from scipy.linalg import _flapack\nfrom numpy import ndarray\n") == [
        "sklearn.utils._param_validation", "numpy._core", "scipy.linalg._flapack"]
    found = {m: _private_dependency_imports(MODULES[m].read_text()) for m in MODULES}
    assert not {m: f for m, f in found.items() if f}


# --- the stages: subpackages in the order the data flows -------------------------------

#: Most modules a reader meets at the top of the package (the rest live in the stages).
MAX_TOP_LEVEL_MODULES = 12
#: The subpackages in the order a fit's data flows through them: each imports only the
#: ones before it (and the top-level modules).
STAGES = ["core", "kernels", "io", "engine", "report", "methods", "grid", "datasets", "plots", "cli"]
#: Edges of the package-level graph (subpackages and top-level modules) that close a
#: cycle, (from, to) -> reason. Each is an import inside a function (FUNCTION_LEVEL).
STAGE_CYCLES_ALLOWED = {
    ("_params", "engine"): "the parameter table names engine.where.Where as the type of `client`, loaded "
                           "only when a value is checked (the command line's start-up loads no Dask)",
}
#: What the core may not import: the cluster, the array store and the package's files.
CORE_FORBIDDEN = ("dask", "distributed", "zarr", f"{PACKAGE}.io")
#: Imports of Dask inside a core function, (module, imported) -> reason.
CORE_LAZY_ALLOWED = {
    ("core.eigen", "dask.utils"): "format_bytes for the sizes in an out-of-memory message, loaded when it is raised",
}


def _node(module):
    """The package-level node of a module: its subpackage, or itself at the top level."""
    parts = module.removeprefix(PACKAGE).removeprefix(".").split(".")
    return parts[0] or "__init__"


def _package_graph():
    graph = {}
    for m, targets in _graph().items():
        graph.setdefault(_node(m), set()).update(_node(t) for t in targets if _node(t) != _node(m))
    return graph


def test_top_level_is_short():
    top = sorted(p.stem for p in ROOT.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules at the top of the package: {top}"
    assert not set(STAGES) - {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}


def test_stage_order():
    """Each subpackage imports only the subpackages before it in :data:`STAGES`."""
    graph = _package_graph()
    wrong = sorted(f"{a} -> {b}" for a in STAGES for b in graph.get(a, ()) if b in STAGES
                   and STAGES.index(b) > STAGES.index(a))
    assert not wrong, "subpackages importing a later stage: " + ", ".join(wrong)


def test_no_package_level_cycle():
    """No cycle between subpackages and top-level modules, but the listed edges."""
    graph = {k: v - {b for (a, b) in STAGE_CYCLES_ALLOWED if a == k} for k, v in _package_graph().items()}
    for targets in list(graph.values()):
        for t in targets:
            graph.setdefault(t, set())
    cycles = _cycles(graph)
    assert not cycles, "import cycles between the package's stages:\n" + "\n".join(" -> ".join(c) for c in cycles)
    stale = sorted(f"{a} -> {b}" for a, b in STAGE_CYCLES_ALLOWED if b not in _package_graph().get(a, ()))
    assert not stale, "STAGE_CYCLES_ALLOWED lists edges that are gone: " + ", ".join(stale)


def _all_imports(path):
    """(top-level imported names, {(function, imported name)}) of every import in ``path``, absolute."""
    module = next(m for m, p in MODULES.items() if p == path)
    top, inner = set(), set()

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, getattr(child, "name", "<lambda>") if function is None else function)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                if isinstance(child, ast.Import):
                    names = {a.name for a in child.names}
                elif child.level:
                    names = _resolve(module, child)
                else:
                    names = {child.module}
                (top if function is None else inner).update(names if function is None else
                                                            {(function, n) for n in names})
            else:
                visit(child, function)

    visit(ast.parse(path.read_text()), None)
    return top, inner


def test_core_imports_no_dask_zarr_or_io():
    """The core (the paper) imports neither Dask, distributed, zarr nor the package's I/O,
    and no package module outside the core but ``errors``."""
    bad, lazy = [], set()
    for module, path in MODULES.items():
        if _node(module) != "core":
            continue
        short = module.removeprefix(PACKAGE + ".")
        top, inner = _all_imports(path)
        for name in top | {n for _f, n in inner}:
            if any(name == f or name.startswith(f + ".") for f in CORE_FORBIDDEN):
                if (short, name) in CORE_LAZY_ALLOWED and name not in top:
                    lazy.add((short, name))
                else:
                    bad.append(f"{short} -> {name}")
            elif name.startswith(PACKAGE) and _node(name) not in ("core", "errors"):
                bad.append(f"{short} -> {name}")
    assert not bad, "the core imports " + ", ".join(sorted(bad))
    assert lazy == set(CORE_LAZY_ALLOWED), "CORE_LAZY_ALLOWED lists imports that are gone"
