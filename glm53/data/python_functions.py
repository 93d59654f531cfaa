"""The functions `glm53 corpus build` harvests from a parsed module, and the rules each must meet.

The unit is a top-level function (`def` or `async def` in the module's body, with its decorators): it runs
without an instance or a class around it, which a method needs (`self`'s attributes, `super()`), so a method
alone is no runnable document. Nested functions come along inside their parent. A document is the function's
lines as written (trailing spaces stripped; top-level code is already dedented) after the module's import lines
that bind a name it uses, rebuilt one binding each in the module's order, then two blank lines.

A function is dropped by the first rule it fails, counted under its reason, and the rules run in this order
(`STAGES`, whose counts make the receipt's funnel):
    tests           named test, test_* or testX (unittest's style; `testmod` is no test)
    docstring       no docstring (with --require-docstring, the default)
    length          fewer lines than --min-lines or more than --max-lines; more bytes than --max-bytes
    characters      a control character other than tab and newline (a form feed, an escape); with --ascii-only
                    (the default) any non-ASCII character
    self_contained  with --self-contained (the default), a name it reads that is neither a builtin, nor bound
                    in it, nor imported by an absolute import of its module (a module-level helper or constant, a
                    relative import, a `*` import, a `global`): it would not run alone
    parses_alone    the document does not compile by itself
"""

from __future__ import annotations

import ast
import builtins
import re
import unicodedata
import warnings
from dataclasses import dataclass

BUILTIN_NAMES = frozenset(dir(builtins))
TEST_NAME = re.compile(r"test(_\w*|[A-Z0-9]\w*)?")
STAGES = (("tests", ("test_function",)), ("docstring", ("no_docstring",)),
          ("length", ("too_few_lines", "too_many_lines", "too_many_bytes")),
          ("characters", ("control_characters", "not_ascii")), ("self_contained", ("not_self_contained",)),
          ("parses_alone", ("does_not_parse",)))
FUNCTION_REASONS = tuple(reason for _, reasons in STAGES for reason in reasons)


@dataclass(frozen=True)
class Function:
    source: str  # the source's name: python-stdlib or a distribution
    path: str  # the file, relative to the source's root
    line: int  # the def's line (its first decorator's, if any)
    name: str
    text: str  # the document: import lines, two blank lines, the function


def import_lines(tree: ast.Module) -> dict[str, str]:
    """Name -> the import line that binds it, rebuilt for that name alone, for the module's absolute imports at
    its top level (`import a.b` binds `a`; `from m import x as y` binds `y`), in the module's order."""
    bound: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                line = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                earlier = bound.get(name, "").split("\n")
                plain = not alias.asname and all(e.startswith("import ") and " as " not in e for e in earlier if e)
                bound[name] = "\n".join(dict.fromkeys([*earlier, line] if plain and earlier[0] else [line]))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module != "__future__":
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = (f"from {node.module} import {alias.name}"
                                                         + (f" as {alias.asname}" if alias.asname else ""))
    return bound


def free_names(node: ast.AST) -> set[str]:
    """The names `node` reads that nothing in it binds (scopes merged: a name bound anywhere in it counts as bound
    everywhere in it, which errs toward keeping; a `global` name is always free)."""
    loaded, bound, declared = set(), set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (loaded if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            bound.add(n.rest)
        elif isinstance(n, ast.Global):
            declared.update(n.names)
    return (loaded - bound) | declared


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<document>", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _bad_character(text: str, ascii_only: bool) -> str | None:
    if any(unicodedata.category(c) == "Cc" and c not in "\t\n" for c in text):
        return "control_characters"
    return "not_ascii" if ascii_only and not text.isascii() else None


def judge(node: ast.FunctionDef | ast.AsyncFunctionDef, body: str, imports: dict[str, str], cfg) -> tuple:
    """(the document, None) for a function that meets every rule, or (None, the first reason it fails)."""
    if TEST_NAME.fullmatch(node.name):
        return None, "test_function"
    if cfg.require_docstring and not (ast.get_docstring(node) or "").strip():
        return None, "no_docstring"
    lines = body.count("\n")
    if lines < cfg.min_lines:
        return None, "too_few_lines"
    if lines > cfg.max_lines:
        return None, "too_many_lines"
    free = free_names(node) - BUILTIN_NAMES - {node.name}
    header = "\n".join(dict.fromkeys(imports[name] for name in sorted(free & set(imports), key=list(imports).index)))
    text = f"{header}\n\n\n{body}" if header else body
    if len(text.encode("utf-8")) > cfg.max_bytes:
        return None, "too_many_bytes"
    bad = _bad_character(text, cfg.ascii_only)
    if bad:
        return None, bad
    if cfg.self_contained and free - set(imports):
        return None, "not_self_contained"
    if not _compiles(text):
        return None, "does_not_parse"
    return text, None


def module_functions(text: str, tree: ast.Module, source: str, path: str, cfg) -> list[tuple]:
    """(Function or None, the reason it was dropped or None) for every top-level function of a module."""
    lines = text.split("\n")
    imports = import_lines(tree)
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        body = "".join(line.rstrip() + "\n" for line in lines[first - 1:node.end_lineno])
        document, reason = judge(node, body, imports, cfg)
        found.append((Function(source, path, first, node.name, document) if document else None, reason))
    return found
