"""The house's rules, read from the source: wings that only look down, no import
circles, one door into the state, one settings object per crawler, small modules.

docs/architecture.md draws the same picture; these tests keep it true.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "increcrawl_scrapy"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

#: Each wing (a subpackage, or a module at the top) and its floor: a module imports
#: only from its own floor and the floors below (``testing`` serves users' tests and
#: the demo; ``commands`` are the operator's door, above everything).
FLOORS: dict[str, int] = {
    # the ground floor's vocabulary
    "compat": 0,
    "stats": 0,
    "close_reasons": 0,
    "urls": 0,
    "scope": 0,
    "config": 0,
    "log_formatter": 0,
    "signals": 0,
    # pure rules
    "schedule": 1,
    "content": 1,
    # the only SQL
    "state": 2,
    # reading sites and the API
    "discovery": 3,
    "geonode": 3,
    # what any crawl with the add-on runs
    "crawl": 4,
    # Scrapy's doors: the spider, the add-on's pages, the pipeline
    "spiders": 5,
    "pages": 5,
    "redirects": 5,
    "pipelines": 5,
    "addon": 6,
    "settings": 6,
    "testing": 7,
    "commands": 8,
    "": 8,  # the package's __init__
}


@cache
def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def owner(name: str) -> str:
    """The module an import of ``name`` runs (``a.b.C`` is ``a.b``'s)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name


def wing(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


@cache
def imports(module: str, typing: bool = False) -> tuple[tuple[str, int], ...]:
    """Our modules ``module`` imports, anywhere in it (a function's imports run too),
    but for ``if TYPE_CHECKING:`` blocks, which never run (*typing*: those too)."""
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not typing:
            typing_only.update(id(inner) for part in node.body for inner in ast.walk(part))
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in modules()
                else node.module
                for alias in node.names
            ]
        else:
            continue
        found += [(owner(n), node.lineno) for n in names if n.split(".")[0] == PACKAGE]
    return tuple((target, line) for target, line in found if target != module)


def outside(*wings: str) -> list[str]:
    return sorted(m for m in modules() if wing(m) not in wings)


def test_every_wing_has_a_floor():
    assert {wing(m) for m in modules()} <= set(FLOORS)


def test_wings_only_look_down():
    upward = [
        f"{module}:{line} imports {target}"
        for module in modules()
        for target, line in imports(module)
        if FLOORS[wing(target)] > FLOORS[wing(module)]
    ]
    assert upward == []


def test_the_addons_pages_and_the_pipeline_stand_beside_the_spider():
    """``pages/`` and the pipeline share floor 5 with ``spiders/`` and borrow nothing
    from it (#50): what both need lives on a floor below (``crawl/validators.py``)."""
    borrowed = [
        f"{module}:{line} imports {target}"
        for module in modules()
        if wing(module) in ("pages", "pipelines")
        for target, line in imports(module, typing=True)
        if wing(target) == "spiders"
    ]
    assert borrowed == []


def test_no_import_circles():
    """None, counting those an ``if TYPE_CHECKING:`` import closes: a circle of types
    is a circle of concerns all the same."""
    graph = {m: {t for t, _ in imports(m, typing=True)} for m in modules()}
    circles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert circles == []


def test_at_most_twelve_modules_at_the_top():
    top = [p.name for p in ROOT.glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= 12, sorted(top)


def test_no_module_over_450_lines_outside_testing():
    long = {
        m: n
        for m in outside("testing")
        if (n := len(modules()[m].read_text(encoding="utf-8").splitlines())) > 450
    }
    assert long == {}


#: A statement's first words (``WITH`` only as a common table expression's: prose and
#: log lines say "with ...").
SQL = re.compile(
    r"^\s*((SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA)\s"
    r"|WITH\s+(RECURSIVE\s+)?\w+\s*(\([^)]*\))?\s*AS\s*\()",
    re.I,
)


def test_no_sql_outside_the_state():
    """Statements and their execution live in ``state/`` (``testing`` starts servers)."""
    found = []
    for module in outside("state", "testing"):
        tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if SQL.match(node.value):
                    found.append(f"{module}:{node.lineno} {node.value.strip()[:40]!r}")
            elif isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "sql"):
                found.append(f"{module}:{node.lineno} .{node.attr}")
    assert found == []


def test_one_door_into_the_state():
    """Outside ``state/`` the state is reached through what ``increcrawl_scrapy.state``
    exports, never through one of its parts, nor past the facade to its parts."""
    through_parts = [
        f"{module}:{line} imports {target}"
        for module in outside("state", "testing")
        for target, line in imports(module)
        if wing(target) == "state" and target != f"{PACKAGE}.state"
    ]
    past_facade = [
        f"{module}:{node.lineno} .{node.value.attr}.{node.attr}"
        for module in outside("state", "testing")
        for node in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr in ("results", "database", "backend", "claims", "queue")
        and isinstance(node.value.value, ast.Attribute | ast.Name)
        and getattr(node.value.value, "attr", getattr(node.value.value, "id", "")) == "store"
    ]
    assert through_parts + past_facade == []


def test_the_settings_object_is_built_in_one_place():
    """``config_for`` builds every :class:`IncrecrawlConfig` a crawl, the add-on or a
    command uses: a crawler's (kept in its memo once the settings freeze), or one
    from settings that have no crawler yet (the add-on's check, a command). It was
    built in three places, each its own way (#53, 9)."""
    builders = [
        f"{module}.{function.name}"
        for module in outside("testing")
        for function in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8")))
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and node.attr == "from_settings"
        and isinstance(node.value, ast.Name)
        and node.value.id == "IncrecrawlConfig"
    ]
    assert builders == [f"{PACKAGE}.config.config_for"]


def test_one_answer_to_is_this_the_incremental_spider():
    asked = [
        f"{module}:{node.lineno}"
        for module in outside("testing")
        for node in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "hasattr"
        and len(node.args) == 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "increcrawl_scope"
    ]
    assert asked == []


@pytest.mark.parametrize(
    "path",
    [
        "increcrawl_scrapy.Addon",
        "increcrawl_scrapy.pipelines.IncrementalStatePipeline",
        "increcrawl_scrapy.spiders.incremental.IncrementalSpider",
        "increcrawl_scrapy.urls.normalize_url",
        "increcrawl_scrapy.settings.ADDONS",
        "increcrawl_scrapy.commands.increcrawl.Command",
        "increcrawl_scrapy.testing.geonode.GeonodeStandIn",
        "increcrawl_scrapy.state.StateStore",
    ],
)
def test_public_paths_stay(path):
    import importlib

    module, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(module), name) is not None


def test_old_module_paths_import_the_moved_modules_with_a_warning():
    import importlib
    import sys

    from increcrawl_scrapy.compat import MOVED

    for old, new in MOVED.items():
        if f"{PACKAGE}.{old}" in modules():
            continue  # a package took the name: its names are asked of it (below)
        sys.modules.pop(f"{PACKAGE}.{old}", None)
        with pytest.warns(DeprecationWarning, match=f"{PACKAGE}.{new}"):
            moved = importlib.import_module(f"{PACKAGE}.{old}")
        assert moved is importlib.import_module(f"{PACKAGE}.{new}")


def test_the_public_names_the_docs_declare_import():
    """docs/reference/python.md declares what a project may rely on: each name there
    imports, and each is in its module's ``__all__`` where the module has one."""
    import importlib
    import re

    table = (ROOT.parent / "docs" / "reference" / "python.md").read_text(encoding="utf-8")
    names = re.findall(r"^\| `(increcrawl_scrapy[\w.]*)` \|", table, flags=re.M)
    assert len(names) >= 8, names
    for dotted in names:
        try:
            importlib.import_module(dotted)  # a module
            continue
        except ImportError:
            pass
        module, _, name = dotted.rpartition(".")
        imported = importlib.import_module(module)
        assert getattr(imported, name) is not None, dotted
        assert name in getattr(imported, "__all__", [name]), dotted


#: The commit 0.2.0 was packaged from (the last release): its modules are the old paths
#: users may import.
RELEASE_0_2_0 = "60413be"


def test_only_old_paths_a_release_had_are_kept():
    """The shim is for users' imports: a path no release had was never theirs (14 of
    45 entries were moves between unreleased commits), and is not kept."""
    import subprocess

    from increcrawl_scrapy.compat import MOVED

    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", RELEASE_0_2_0, PACKAGE],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("not a git clone with the release's commit (an sdist)")
    released = {
        path[len(PACKAGE) + 1 : -3].replace("/", ".").removesuffix(".__init__")
        for path in listed.stdout.split()
        if path.endswith(".py")
    }
    assert sorted(set(MOVED) - released) == []


def test_an_old_modules_names_asked_of_the_package_that_took_its_name():
    from increcrawl_scrapy.discovery.parse import iter_sitemap
    from increcrawl_scrapy.schedule.policy import classify

    with pytest.warns(DeprecationWarning, match="discovery.parse"):
        from increcrawl_scrapy.discovery import iter_sitemap as old_iter_sitemap
    with pytest.warns(DeprecationWarning, match="schedule.policy"):
        from increcrawl_scrapy.schedule import classify as old_classify
    assert (old_iter_sitemap, old_classify) == (iter_sitemap, classify)
    with pytest.raises(ImportError):
        from increcrawl_scrapy.discovery import no_such_name  # noqa: F401


def _private_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(defined, reached into): private names a tree defines (functions, classes,
    assignments, ``self._x = ...``), and those it reads or sets on an object not
    its own (``other._x``, not ``self._x``/``cls._x``)."""
    defined, reached = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if own and isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif not own:
                reached.add(node.attr)
        elif _getattr_of_private(node):
            reached.add(node.args[1].value)  # getattr(engine, "_slot") reaches in too
    private = {name for name in defined | reached if name.startswith("_")}
    dunder = {name for name in private if name.startswith("__") and name.endswith("__")}
    return defined & private - dunder, reached & private - dunder


def _getattr_of_private(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr", "setattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and node.args[1].value.startswith("_")
    )


#: Scrapy's private attributes the package reads, each in ``compat.py`` alone (one
#: place to mend when Scrapy renames it), each for want of a public way: the
#: engine's slot (is the crawl closing; wake it now rather than at its heartbeat);
#: the encoding a response was made with (a page's text made again in a worker).
COMPAT_PRIVATE = {"_slot", "_encoding"}


def test_no_private_attribute_of_scrapy_is_used():
    """Scrapy's private attributes change without notice (``FeedExporter._get_storage``
    was replaced here once): what a crawl needs of Scrapy goes through its public
    names, or through ``compat.py`` for the few with none. A private name of ours
    reached on another of our objects is fine. ``getattr(x, "_name")`` counts."""
    import scrapy

    ours, reached = set(), set()
    for module, path in modules().items():
        defined, into = _private_names(ast.parse(path.read_text(encoding="utf-8")))
        ours |= defined
        reached |= into - COMPAT_PRIVATE if module == "increcrawl_scrapy.compat" else into
    theirs = set()
    for path in Path(scrapy.__file__).parent.rglob("*.py"):
        theirs |= _private_names(ast.parse(path.read_text(encoding="utf-8")))[0]
    assert sorted((reached - ours) & theirs) == []


#: A small module of the state with one caller, kept apart: ``StateStore``'s mixin of
#: the operator's edits (store.py would pass the 450 lines with it).
SMALL_AND_APART = {"increcrawl_scrapy.state.edits"}


def test_the_states_small_modules_live_in_their_one_caller():
    """A module of ``state/`` under 60 lines that one module imports is part of that
    module (``lock.py`` and ``budget.py`` were, of ``store.py``). Not the dialects'
    packages, whose statements are split by the same parts on both sides."""
    callers: dict[str, set[str]] = {}
    for module in modules():
        for target, _ in imports(module, typing=True):
            callers.setdefault(target, set()).add(module)
    small = [
        m
        for m, path in modules().items()
        if m.startswith(f"{PACKAGE}.state.")
        and m.count(".") == 2
        and path.name != "__init__.py"
        and len(path.read_text(encoding="utf-8").splitlines()) < 60
        and len(callers.get(m, ())) == 1
    ]
    assert sorted(set(small) - SMALL_AND_APART) == []
