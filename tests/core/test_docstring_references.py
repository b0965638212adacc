"""Every code reference in a docstring or a design document names something that exists.

The convention the tests check (docs/design.md, "Code references"):

* a Sphinx role (``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:attr:``, ``:data:``,
  ``:exc:``, ``:obj:``) names a module, class, function or attribute that resolves from
  where the docstring stands: the enclosing class, the module (its imports included, also
  those inside functions), the module's package for a leading dot, or a full dotted path;
* a double-backticked ``eyefold.x.y`` resolves by import and attribute access;
* a double-backticked snake_case name (``convert_graph``, ``ir_version``) or call
  (``save_model()``) is a name the package's code uses: a module, function, class,
  variable, parameter, attribute, keyword or string key. A literal that is not code (an
  attribute value, an example name) is written quoted: ``"half_pixel"``;
* a path ending in ``.py`` (``tests/test_kernel.py``) is a file of the repository;
* in README.md and docs/*.md, a backticked or linked repository path exists, a backticked
  ``eyefold.x`` resolves, and in a table row that starts with a folder, every bare
  ``name.py`` is a file of that folder.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import pathlib
import re
from collections.abc import Iterator
from types import ModuleType

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# Source folder -> the package it is installed as.
PACKAGES = {"eyefold": "eyefold", "rules": "eyefold.rules"}
# Importing it runs the command line.
NOT_IMPORTED = {"eyefold.__main__"}
DOCUMENTS = ["README.md", "docs"]
# It names the test of each promise, and is rewritten whole when the tests move.
LEFT_OUT = {pathlib.Path("docs/reliability.md")}

ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc|obj):`([^`]+)`")
LITERAL = re.compile(r"``([^`]+)``")
SNAKE_NAME = re.compile(r"_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
CALL = re.compile(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\(\)")
DOTTED = re.compile(r"eyefold(?:\.\w+)+")
PY_PATH = re.compile(r"(?<![\w/.<])([\w/.-]*\w\.py)\b")
REPO_PATH = re.compile(
    r"(?<![\w/.])((?:eyefold|rules|tests|benchmarks|docs|sample_models)/[\w/.-]*\w/?)"
)
BARE_PY = re.compile(r"`(\w+\.py)`")
TABLE_FOLDER = re.compile(r"^\|\s*`((?:eyefold|rules)(?:/\w+)*/)`")


@dataclasses.dataclass(frozen=True)
class Docstring:
    """One docstring, with where it stands."""

    path: str
    line: int
    module: str
    owners: tuple[str, ...]
    text: str

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_name(path: pathlib.Path) -> str:
    """The dotted name ``path`` (relative to the repository) is imported as."""
    parts = list(path.with_suffix("").parts)
    parts[0] = PACKAGES[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> list[pathlib.Path]:
    return sorted(
        path.relative_to(REPO) for folder in PACKAGES for path in (REPO / folder).rglob("*.py")
    )


def docstrings(path: str, module: str, source: str) -> Iterator[Docstring]:
    """Every docstring of a module, its classes and its functions, with its owners."""
    tree = ast.parse(source)

    def walk(node: ast.AST, owners: tuple[str, ...]) -> Iterator[Docstring]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                inner = (*owners, child.name)
                text = ast.get_docstring(child, clean=False)
                if text:
                    yield Docstring(path, child.lineno, module, inner, text)
                yield from walk(child, inner)
            else:
                yield from walk(child, owners)

    text = ast.get_docstring(tree, clean=False)
    if text:
        yield Docstring(path, 1, module, (), text)
    yield from walk(tree, ())


def code_names(sources: dict[str, str]) -> set[str]:
    """Every name the code uses: what a snake_case docstring name may refer to."""
    names: set[str] = set()
    for path, source in sources.items():
        file = pathlib.Path(path)
        names.add(file.stem if file.name != "__init__.py" else file.parent.name)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.arg | ast.keyword) and node.arg:
                names.add(node.arg)
            elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.alias):
                names.update(node.name.split("."))
                names.add(node.asname or node.name)
            elif isinstance(node, ast.Constant) and str(node.value).isidentifier():
                names.add(node.value)
    return names


def imported_names(source: str) -> dict[str, str]:
    """Names a module binds by import anywhere (inside functions too) -> dotted target."""
    bound: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
    return bound


def member(owner: object, name: str) -> object:
    """``owner.name``, including a class's annotated (dataclass) fields; raises if none."""
    try:
        return getattr(owner, name)
    except AttributeError:
        if isinstance(owner, type):
            for cls in owner.__mro__:
                if name in getattr(cls, "__annotations__", {}):
                    return None
        raise


def resolves(dotted: str) -> bool:
    """Whether a full dotted name imports, its tail found by attribute access."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                found = member(found, name)
        except AttributeError:
            return False
        return True
    return False


def resolves_in(owner: object, dotted: str) -> bool:
    try:
        for name in dotted.split("."):
            owner = member(owner, name)
    except AttributeError:
        return False
    return True


def role_target(text: str) -> str:
    """The object a role names: ``~x.y`` -> ``x.y``, ``title <x.y>`` -> ``x.y``."""
    if text.endswith(">") and "<" in text:
        text = text[text.rindex("<") + 1 : -1]
    return text.lstrip("~!").removesuffix("()")


def role_resolves(target: str, doc: Docstring, module: ModuleType, imports: dict) -> bool:
    package = module.__spec__.parent
    if target.startswith("."):
        return resolves(package + target) or resolves_in(module, target[1:])
    first, _, rest = target.partition(".")
    scopes: list[object] = [module]
    owner: object = module
    for name in doc.owners:
        owner = getattr(owner, name, None)
        if isinstance(owner, type):
            scopes.insert(0, owner)
    if any(resolves_in(scope, target) for scope in scopes):
        return True
    if first in imports:
        return resolves(imports[first] + ("." + rest if rest else ""))
    return resolves(target) or resolves(f"{package}.{target}") or hasattr(builtins, target)


def path_exists(text: str, near: pathlib.Path) -> bool:
    """Whether a path names a file of the repository (from its root, or beside ``near``)."""
    return (REPO / text).exists() or (REPO / near.parent / text).exists()


def literal_problems(doc: Docstring, names: set[str]) -> Iterator[str]:
    """The double-backticked references of one docstring that name nothing."""
    for match in LITERAL.finditer(doc.text):
        literal = match.group(1)
        call = CALL.fullmatch(literal)
        if SNAKE_NAME.fullmatch(literal) and literal not in names:
            yield f"{doc.where()}: ``{literal}`` is no name in the code"
        elif call and call.group(1) not in names and not hasattr(builtins, call.group(1)):
            yield f"{doc.where()}: ``{literal}`` calls no function in the code"
        elif DOTTED.fullmatch(literal) and not resolves(literal):
            yield f"{doc.where()}: ``{literal}`` does not resolve"


def path_problems(text: str, where: str, near: pathlib.Path) -> Iterator[str]:
    for match in PY_PATH.finditer(text):
        if not path_exists(match.group(1), near):
            yield f"{where}: {match.group(1)} does not exist"


def docstring_problems(sources: dict[str, str], checked: list[str]) -> list[str]:
    """The stale references in the docstrings of the ``checked`` paths of ``sources``.

    ``sources``: every source file of the package (path -> text), where names are found.
    """
    names = code_names(sources)
    problems: list[str] = []
    for path in checked:
        source = sources[path]
        module_path = pathlib.Path(path)
        module = module_name(module_path)
        if module in NOT_IMPORTED:
            continue
        imported = importlib.import_module(module)
        imports = imported_names(source)
        for doc in docstrings(path, module, source):
            problems.extend(
                f"{doc.where()}: {match.group(0)} does not resolve"
                for match in ROLE.finditer(doc.text)
                if not role_resolves(role_target(match.group(1)), doc, imported, imports)
            )
            problems.extend(literal_problems(doc, names))
            problems.extend(path_problems(doc.text, doc.where(), module_path))
    return problems


def document_problems(path: pathlib.Path, text: str) -> Iterator[str]:
    """The stale references of one Markdown document (``path`` relative to the repo)."""
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{number}"
        spans = re.findall(r"`([^`]+)`", line) + re.findall(r"\]\(([^)#]+)", line)
        for span in spans:
            for found in REPO_PATH.findall(span):
                if "<" not in span and not path_exists(found, path):
                    yield f"{where}: {found} does not exist"
            for dotted in DOTTED.findall(span):
                if not resolves(dotted):
                    yield f"{where}: {dotted} does not resolve"
        if table := TABLE_FOLDER.match(line):
            folder = REPO / table.group(1)
            for name in BARE_PY.findall(line):
                if not (folder / name).exists():
                    yield f"{where}: {name} is not in {table.group(1)}"


def documents() -> list[pathlib.Path]:
    found = []
    for entry in DOCUMENTS:
        path = REPO / entry
        found.extend(sorted(path.glob("*.md")) if path.is_dir() else [path])
    return [path.relative_to(REPO) for path in found if path.relative_to(REPO) not in LEFT_OUT]


def test_docstring_references_exist() -> None:
    sources = {str(path): (REPO / path).read_text() for path in source_files()}
    problems = docstring_problems(sources, list(sources))
    assert not problems, "stale references in docstrings:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", documents(), ids=str)
def test_document_references_exist(path: pathlib.Path) -> None:
    problems = list(document_problems(path, (REPO / path).read_text()))
    assert not problems, f"stale references in {path}:\n" + "\n".join(problems)


def test_stale_references_are_found() -> None:
    """The checks report names that no longer exist, in a real module's docstrings."""
    path = "eyefold/upgrade/on_proto.py"
    sources = {str(path): (REPO / path).read_text() for path in source_files()}
    line = sources[path].count("\n") + 3
    sources[path] += (
        "\n\ndef _stale() -> None:\n"
        '    """Validated (``upgrade_validation``), merged (:mod:`.upgrade_merge`),"""\n'
    )
    assert docstring_problems(sources, [path]) == [
        f"{path}:{line}: :mod:`.upgrade_merge` does not resolve",
        f"{path}:{line}: ``upgrade_validation`` is no name in the code",
    ]


def test_stale_document_references_are_found() -> None:
    text = (
        "See `eyefold/upgrade/upgrade_merge.py` and `eyefold.passes.NoSuchPass`.\n"
        "| `eyefold/upgrade/` | `conversion.py`, `version_conversion.py` |\n"
    )
    assert list(document_problems(pathlib.Path("docs/design.md"), text)) == [
        "docs/design.md:1: eyefold/upgrade/upgrade_merge.py does not exist",
        "docs/design.md:1: eyefold.passes.NoSuchPass does not resolve",
        "docs/design.md:2: version_conversion.py is not in eyefold/upgrade/",
    ]
