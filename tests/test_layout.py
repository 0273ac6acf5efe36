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
    ("cli.fit", "engine.cluster"): _CLI_COST,
    ("cli.fit", "_validate"): _CLI_COST,
    ("cli.fit", "estimator"): _CLI_COST,
    ("cli.fit", "io"): _CLI_COST,
    ("cli.fit", "io.atomic"): _CLI_COST,
    ("cli.fit", "report.record"): _CLI_COST,
    ("cli.grids", "engine.where"): _CLI_COST,
    ("cli.grids", "engine.cluster"): _CLI_COST,
    ("cli.grids", "grid.compare"): _CLI_COST,
    ("cli.grids", "engine.device_route"): _CLI_COST,
    ("cli.grids", "io.locks"): _CLI_COST,
    ("cli.grids", "grid.sweep"): _CLI_COST,
    ("cli.inputs", "datasets"): _CLI_COST,
    ("cli.inputs", "engine.route"): _CLI_COST,
    ("cli.inputs", "engine.where"): _CLI_COST,
    ("cli.inputs", "estimator"): _CLI_COST,
    ("cli.inputs", "io"): _CLI_COST,
    ("cli.inputs", "kernels.features"): _CLI_COST,
    ("cli.outputs", "io.atomic"): _CLI_COST,
    ("cli.outputs", "io.integrity"): _CLI_COST,
    ("cli.outputs", "io.results"): _CLI_COST,
    ("cli.outputs", "plots"): _CLI_COST + "; plots needs the optional matplotlib",
    ("cli.outputs", "grid.tables"): _CLI_COST,
    ("cli.fit", "predict"): _CLI_COST,
    ("cli.predict", "estimator"): _CLI_COST,
    ("cli.predict", "engine.cluster"): _CLI_COST,
    ("cli.predict", "engine.where"): _CLI_COST,
    ("cli.predict", "io.atomic"): _CLI_COST,
    ("cli.predict", "io.npz"): _CLI_COST,
    ("cli.predict", "report.record"): _CLI_COST,
    ("cli.validate", "estimator"): _CLI_COST,
    ("cli.validate", "report.localise"): _CLI_COST,
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


# --- size and complexity -------------------------------------------------------------

#: A module holds one job: at most this many lines.
MAX_MODULE_LINES = 700
#: A function's statements, its docstring aside, at most this many lines.
MAX_FUNCTION_LINES = 80
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


def _function_measures(source):
    """``{name: (statement lines, complexity)}`` of every function and method in ``source``
    (nested functions count within theirs; the longest of a repeated name)."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            lines = node.end_lineno - body[0].lineno + 1 if body else 0
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


def _module_name(path):
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") or "__init__"


def test_module_sizes():
    """No module over :data:`MAX_MODULE_LINES` lines but those listed with their reason."""
    sizes = {_module_name(p): len(p.read_text().splitlines()) for p in MODULES.values()}
    over = {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES}
    unlisted = sorted(f"{m} ({n} lines)" for m, n in over.items() if m not in LONG_MODULES)
    assert not unlisted, (f"modules over {MAX_MODULE_LINES} lines (split them by job, or list them in "
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
    assert not unlisted, (f"functions over {MAX_FUNCTION_LINES} lines or complexity {MAX_COMPLEXITY} (split "
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


# --- private names stay inside their module ------------------------------------------

#: ``(module, imported name)`` pairs allowed to cross a module boundary with a leading
#: underscore. Empty: a name another module uses is part of its module's interface and
#: has a public name.
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str]] = set()


def _is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(module, source):
    """``(module, "target.name")`` for every ``from target import _name`` in ``source`` (at
    any depth) where target is a package module and ``_name`` is not one of its submodules
    nor a dunder; and for every ``alias._name`` where ``alias`` names a package module."""
    tree = ast.parse(source)
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
        if not isinstance(node, ast.ImportFrom):
            continue
        targets = _resolve(module, ast.ImportFrom(module=node.module, names=[ast.alias("*")], level=node.level))
        for alias, target in ((a, t) for a in node.names for t in targets):
            if f"{target}.{alias.name}" in MODULES:
                modules[alias.asname or alias.name] = f"{target}.{alias.name}"
            elif _is_private(alias.name):
                found.append((target, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and _is_private(node.attr):
            found.append((modules[node.value.id], node.attr))
    short = module.removeprefix(PACKAGE + ".")
    return [(short, f"{t.removeprefix(PACKAGE + '.')}.{n}") for t, n in found]


def test_private_import_finder():
    """The checker finds a private name imported from a module or read as a module's
    attribute, and passes private modules, public names and dunders (so a pass means none, not a blind test)."""
    module = f"{PACKAGE}.plots.knn"
    source = ("from ._base import SWEEP_PNGS, _save\nfrom ..core import eigen as _eigen\nfrom .._version import __version__\n"
              "def f():\n    from ..io.ownership import (\n        _utc_now,\n    )\n    return _eigen._bytes(SWEEP_PNGS)\n")
    assert _private_imports(module, source) == [("plots.knn", "plots._base._save"), ("plots.knn", "io.ownership._utc_now"),
                                                ("plots.knn", "core.eigen._bytes")]


def test_no_private_name_crosses_a_module():
    """No module imports, or reads as an attribute, another package module's underscore
    name (package-internal helpers that another module uses get a public name in the module that owns them)."""
    found = {pair for m in MODULES for pair in _private_imports(m, MODULES[m].read_text())}
    crossing = sorted(found - PRIVATE_IMPORTS_ALLOWED)
    assert not crossing, ("underscore names imported from another module of the package (give each a public "
                          "name in the module that owns it): " + ", ".join(f"{m} <- {n}" for m, n in crossing))
    stale = sorted(PRIVATE_IMPORTS_ALLOWED - found)
    assert not stale, "PRIVATE_IMPORTS_ALLOWED lists imports that are gone: " + ", ".join(f"{m} <- {n}" for m, n in stale)


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
