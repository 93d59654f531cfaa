"""Stage 1 of the verifier: a static, fail-closed check of a candidate's source, at a language level.

Accepted: a module holding exactly one function, named as the task's entry point (plus an optional
docstring), whose body uses only what its language level allows (languages.py: `reference`, the reference
suite's one-line subset, or `python`, ordinary Python without imports, classes or attribute names outside an
allow-list). Everything else is refused with the rule it broke, before any code runs. The check parses; it
never compiles or executes, and it is bounded: at most 4 KiB of source, 1,500 syntax nodes, nesting 100 deep,
and 0.25 s of the checking thread's CPU time for the walk over the tree.
"""

from __future__ import annotations

import ast
import threading
import string
import time
import unicodedata
import warnings

from .languages import DEFAULT_LANGUAGE, REFERENCE_BUILTINS, Language, get_language

MAX_SOURCE_BYTES = 4096
MAX_NODES = 1500
MAX_DEPTH = 100
TIME_BUDGET_S = 0.25  # CPU time of the checking thread: a busy machine or other threads do not count
# The reference level's pure builtins. range/sorted/list/... make unbounded work possible (`sum(range(10**12))`),
# which the execution stage's time and memory limits handle.
ALLOWED_CALLS = REFERENCE_BUILTINS


class StaticCheckError(ValueError):
    """The source breaks a rule; `rule` names it (e.g. 'import', 'call', 'top-level')."""

    def __init__(self, rule: str, message: str):
        super().__init__(f"{rule}: {message}")
        self.rule = rule


def _format_field_reaches_attribute(text: str) -> bool:
    """True when `text`, used as a str.format template, would look up an attribute or item of an argument."""
    try:
        fields = [field for _, field, spec, _ in string.Formatter().parse(text) if field is not None]
        fields += [field for _, _, spec, _ in string.Formatter().parse(text) if spec
                   for _, field, _, _ in string.Formatter().parse(spec) if field is not None]
    except ValueError:
        return False  # not a valid template: str.format would refuse it too
    return any("." in field or "[" in field for field in fields)


def _walk_bounded(root: ast.AST, deadline: float):
    """ast.walk with a node budget, a depth bound and a deadline, depth-first without recursion."""
    stack, count = [(root, 0)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise StaticCheckError("size", f"more than {MAX_NODES} syntax nodes")
        if depth > MAX_DEPTH:
            raise StaticCheckError("size", f"nested more than {MAX_DEPTH} deep")
        if count % 64 == 1 and time.thread_time() > deadline:
            raise StaticCheckError("time", "the static check ran out of its time budget")
        yield node
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


# CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so two threads parsing at
# once can fail with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905); the pool
# is shared between threads, so parsing is serialized (it is a small share of a verdict's time).
_PARSE_LOCK = threading.Lock()


def normalized_name(name: str) -> str:
    """A name as the parser stores it: non-ASCII identifiers are NFKC-normalised (full-width letters and ligatures
    become plain ones)."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def check_source(source: str, entry_point: str, time_budget_s: float = TIME_BUDGET_S,
                 language: str = DEFAULT_LANGUAGE) -> ast.Module:
    """Return the parsed module, or raise StaticCheckError naming the broken rule. The entry point is compared as
    Python reads identifiers, NFKC-normalised (PEP 3131): `def ﬁx` defines `fix`."""
    level = get_language(language)
    entry_point = normalized_name(entry_point)
    if not isinstance(source, str):
        raise StaticCheckError("type", "source must be a str")
    if "\x00" in source:
        raise StaticCheckError("null-byte", "source contains a null byte")
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        raise StaticCheckError("size", f"source is {size} bytes, over the limit of {MAX_SOURCE_BYTES}")
    try:
        # the model's programs may hold odd literals ("1if x"): Python warns about those on stderr; not our output
        with _PARSE_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source)
    except SyntaxError as err:
        raise StaticCheckError("syntax", f"{err.msg} (line {err.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise StaticCheckError("syntax", f"unparsable source ({type(err).__name__})") from None
    # The budget covers the walk, not the parse: parsing is bounded by the 4 KiB size limit, and a garbage
    # collection of a large caller's heap that happens to run inside ast.parse once cost a valid program 0.25 s.
    deadline = time.thread_time() + time_budget_s

    functions = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions.append(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # a docstring
        else:
            raise StaticCheckError("top-level", f"only the function {entry_point} may stand at top level, "
                                                f"found {type(node).__name__} on line {node.lineno}")
    if len(functions) != 1:
        raise StaticCheckError("top-level", f"exactly one function must be defined, found {len(functions)}")
    function = functions[0]
    if function.name != entry_point:
        raise StaticCheckError("name", f"the function is named {function.name!r}, expected {entry_point!r}")
    if function.decorator_list:
        raise StaticCheckError("decorator", "decorators are not allowed")
    args = function.args
    if args.defaults or args.kw_defaults or args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise StaticCheckError("signature", "only plain positional parameters, without defaults, are allowed")
    if function.returns is not None or any(a.annotation is not None for a in args.args):
        raise StaticCheckError("annotation", "annotations are evaluated at definition time and are not allowed")
    if getattr(function, "type_params", None):
        raise StaticCheckError("signature", "type parameters are not allowed")

    _check_body(function, entry_point, level, deadline)
    for a in args.args:
        if a.arg.startswith("__"):
            raise StaticCheckError("dunder", f"parameter {a.arg!r} is not allowed")
    return tree


def _check_body(function: ast.FunctionDef, entry_point: str, level: Language, deadline: float) -> None:
    protected = (level.builtins | {entry_point}) if level.protect_builtins else frozenset()
    for node in _walk_bounded(function, deadline):
        if node is function:
            continue
        rule = level.forbidden_nodes.get(type(node))
        if rule:
            raise StaticCheckError(rule, f"{rule} is not allowed (line {getattr(node, 'lineno', '?')})")
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise StaticCheckError("dunder", f"name {node.id!r} is not allowed")
            if node.id in level.forbidden_names:
                raise StaticCheckError("name", f"{node.id!r} is not available (line {node.lineno})")
            if not level.allow_recursion and node.id == entry_point and isinstance(node.ctx, ast.Load):
                raise StaticCheckError("recursion", f"the body may not refer to {entry_point!r} itself")
            if node.id in protected and not isinstance(node.ctx, ast.Load):
                raise StaticCheckError("rebind", f"{node.id!r} may not be assigned (line {node.lineno})")
        elif isinstance(node, ast.arg):
            if node.arg in protected:
                raise StaticCheckError("rebind", f"parameter {node.arg!r} would shadow a protected name")
            if node.arg.startswith("__"):
                raise StaticCheckError("dunder", f"parameter {node.arg!r} is not allowed")
        elif isinstance(node, ast.Attribute):  # reached only where the level allows attribute access
            _check_attribute(node, level)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):  # reached only where the level has modules
            _check_import(node, level)
        elif isinstance(node, ast.FunctionDef) and node.decorator_list:
            raise StaticCheckError("decorator", "decorators are not allowed")
        elif isinstance(node, ast.ExceptHandler) and node.name and node.name.startswith("__"):
            raise StaticCheckError("dunder", f"name {node.name!r} is not allowed")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _format_field_reaches_attribute(node.value):
            raise StaticCheckError("attribute access", "a format field may not look up attributes or items")
        elif isinstance(node, ast.Call) and level.protect_builtins:
            if not (isinstance(node.func, ast.Name) and node.func.id in level.builtins):
                called = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
                raise StaticCheckError("call", f"call of {called!r} is not allowed; allowed: {sorted(level.builtins)}")


def _check_attribute(node: ast.Attribute, level: Language) -> None:
    if not isinstance(node.ctx, ast.Load):
        raise StaticCheckError("attribute store", f"attributes may not be assigned or deleted (line {node.lineno})")
    if node.attr.startswith("_") or node.attr not in level.attributes:
        raise StaticCheckError("attribute", f"attribute {node.attr!r} is not in the {level.name} level's "
                                            f"allow-list (line {node.lineno})")


def _check_import(node: ast.Import | ast.ImportFrom, level: Language) -> None:
    """`import m [as n]` of a module the level lists, or `from m import name [as n]` of a name it lists for m."""
    where = f"(line {node.lineno})"
    if isinstance(node, ast.ImportFrom):
        if node.level or node.module not in level.modules:
            raise StaticCheckError("import", f"import from {node.module!r} is not allowed {where}; the "
                                             f"{level.name} level imports {', '.join(sorted(level.modules))}")
        allowed = level.modules[node.module]
        for alias in node.names:
            if alias.name not in allowed:
                raise StaticCheckError("import", f"{node.module}.{alias.name} is not in the {level.name} level's "
                                                 f"allow-list {where}")
    else:
        for alias in node.names:
            if alias.name not in level.modules:
                raise StaticCheckError("import", f"import of {alias.name!r} is not allowed {where}; the "
                                                 f"{level.name} level imports {', '.join(sorted(level.modules))}")
    for alias in node.names:
        if (alias.asname or "").startswith("__"):
            raise StaticCheckError("dunder", f"name {alias.asname!r} is not allowed")


def is_valid(source: str, entry_point: str, language: str = DEFAULT_LANGUAGE) -> bool:
    try:
        check_source(source, entry_point, language=language)
    except StaticCheckError:
        return False
    return True
