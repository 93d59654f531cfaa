"""The package's layout (issues 33 and 60): folders by stage of a model's life on floors that import only downward,
imports by name counted as imports, no import circles, small modules, each folder's modules listed in reading order.

Run as a script (`python tests/test_layout.py`) it prints the floor plan (each room's floor and what it imports,
the arrows that do not run down, the circles among modules and among rooms), the longest modules and the longest
functions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "glm53"
MAX_MODULE_LINES = 400
MAX_LOOSE_MODULES = 8  # at the top of glm53/: the package face, `python -m glm53`, the CLI, the main job
# Over the limit and owned elsewhere; remove an entry once its module is under the limit (none today).
KNOWN_LONG_MODULES: set[str] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def import_graph() -> dict[str, set[str]]:
    """Module -> the glm53 modules it imports, at the top or inside a function (both run, and both can close a
    circle), by statement or by name (see imports_of)."""
    known = modules()
    return {name: imports_of(path.read_text(), name, path.name == "__init__.py", known)
            for name, path in known.items()}


def imports_of(source: str, name: str, is_package: bool, known: dict[str, Path]) -> set[str]:
    """The glm53 modules that the module `name` (its text `source`) reaches. By statement: `import a.b`, and
    `from package import name` as package.name when that is a module, else package. By name: every string whose
    whole text is a glm53 module path (`"glm53.decode.engine"`, `"glm53.train.rl:rl_train"`), as given to
    importlib.import_module or __import__, or kept in a registry (the package face's lazy names, the sweep's
    preload list): a name is written to be imported, so it is an edge like any other. A path that names an
    attribute counts as its module. A name built at run time is refused instead (test_no_glm53_name_is_built)."""
    package = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            source_module = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                targets.add(f"{source_module}.{a.name}" if f"{source_module}.{a.name}" in known else source_module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and module_path(node.value):
            targets.add(module_path(node.value))
    resolved = set()
    for target in targets:
        while target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in known and target != name and target.startswith("glm53"):
            resolved.add(target)
    return resolved


def module_path(text: str) -> str | None:
    """The dotted path a string names when its whole text is one under glm53 (`module:attribute` as its module),
    else None: prose, a file path or a half-built name is no import."""
    path, _, attribute = text.partition(":")
    parts = path.split(".") + (attribute.split(".") if attribute else [])
    return path if path.startswith("glm53.") and all(p.isidentifier() for p in parts) else None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def folder_of(name: str) -> str:
    """The stage folder a module lies in (glm53.train.rl -> train), or the module itself when loose (glm53.cli)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else name


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Folder -> the folders its modules import (every module, a folder's commands.py too)."""
    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        edges = folders.setdefault(folder_of(name), set())
        edges.update(folder_of(t) for t in targets if folder_of(t) != folder_of(name))
    return folders


# The floors of the house, ground first: a room (a stage folder, or a loose module) imports only rooms on the
# floors below its own. A room not listed here is refused by the test (a new folder is given its floor on purpose).
FLOORS: list[tuple[str, ...]] = [
    ("runtime",),
    ("model", "verify"),
    ("checkpoints", "data", "recipes"),  # recipes/ names the model's architectures, and is read by every trainer
    ("decode",),
    ("evaluate", "serve"),  # serve decodes and judges as eval does, and imports nothing of evaluate/
    ("train", "report", "interop"),  # report/ reads run folders' files (the main job's too); it imports runtime/
    # and the pass@k estimator of evaluate/pass_at_k.py (plain Python). interop/ puts models, the verifier and task
    # files in the Hugging Face ecosystem's forms
    ("speed", "vision", "glm53.run_config"),
    ("glm53.run",),
    ("sweep",),
    ("glm53.cli",),
    ("glm53", "glm53.__main__"),  # the package face loads lazily (PEP 562), and `python -m glm53` runs the CLI
]


def floor_of(room: str) -> int | None:
    return next((i for i, rooms in enumerate(FLOORS) if room in rooms), None)


def arrows_up(folders: dict[str, set[str]]) -> list[str]:
    """The imports that do not run down: to a room on the same floor or above, or from or to an unplanned room.
    The package face is exempt as a target: `from .. import __version__` reads a string, and loads no stage."""
    found = []
    for room, targets in sorted(folders.items()):
        for target in sorted(targets - {"glm53"}):
            here, there = floor_of(room), floor_of(target)
            if here is None or there is None or there >= here:
                found.append(f"{room} -> {target}")
    return found


def floor_plan(graph: dict[str, set[str]]) -> str:
    """The house as text: each floor's rooms (top floor first) with what they import, the arrows that do not run
    down, and the circles among modules and among rooms."""
    folders = folder_graph(graph)
    lines = [f"{len(graph)} modules in {len(folders)} rooms on {len(FLOORS)} floors"]
    for level in range(len(FLOORS) - 1, -1, -1):
        for room in FLOORS[level]:
            if room in folders:
                size = sum(1 for m in graph if folder_of(m) == room)
                lines.append(f"  floor {level:2d}  {room:22s} {size:3d} modules -> "
                             f"{', '.join(sorted(folders[room])) or '-'}")
    unplanned = sorted(set(folders) - {r for rooms in FLOORS for r in rooms})
    lines.append(f"rooms without a floor: {', '.join(unplanned) or 'none'}")
    up = arrows_up(folders)
    lines.append(f"arrows up: {len(up)}" + "".join(f"\n  {a}" + "".join(
        f"\n      {m} -> {', '.join(sorted(t for t in graph[m] if folder_of(t) == a.split(' -> ')[1]))}"
        for m in sorted(graph) if folder_of(m) == a.split(" -> ")[0]
        and any(folder_of(t) == a.split(" -> ")[1] for t in graph[m])) for a in up))
    lines.append(f"module circles: {cycles(graph) or 'none'}")
    lines.append(f"room circles: {cycles(folders) or 'none'}")
    return "\n".join(lines)


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def longest_functions(limit: int = 5) -> list[tuple[int, str]]:
    lengths = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths.append((node.end_lineno - node.lineno + 1, f"{name}.{node.name}"))
    return sorted(lengths, reverse=True)[:limit]


def test_no_module_imports_itself_in_a_circle():
    assert cycles(import_graph()) == []


def test_the_stage_folders_import_each_other_without_a_circle():
    assert cycles(folder_graph(import_graph())) == []


def test_every_room_has_a_floor_and_imports_only_rooms_below_it():
    """No arrow runs up, a folder's commands.py included: the CLI's wiring lives in the folder whose floor
    already holds what the command needs (`glm53 eval` loads a checkpoint from checkpoints/, below evaluate/)."""
    assert arrows_up(folder_graph(import_graph())) == []


def test_no_module_is_over_400_lines():
    long = {p.relative_to(PACKAGE).as_posix(): line_count(p) for p in modules().values()
            if line_count(p) > MAX_MODULE_LINES}
    assert set(long) <= KNOWN_LONG_MODULES, f"over {MAX_MODULE_LINES} lines: {long}"


def test_at_most_8_modules_lie_loose_at_the_top():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_every_folder_is_a_package_whose_docstring_says_what_it_holds():
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    for folder in sorted(folders):
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder} has no __init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no docstring"


def reading_order(init: Path) -> list[str]:
    """The modules (`x.py`) and folders (`x/`) a package's docstring lists: the lines indented by 4 spaces that open
    with such a name (what follows on the line, and lines indented deeper, describe it)."""
    docstring = ast.get_docstring(ast.parse(init.read_text()), clean=False) or ""
    return re.findall(r"^    ([\w.]+\.py|\w+/)(?=\s|$)", docstring, re.MULTILINE)


def test_every_folder_lists_each_of_its_modules_once_in_reading_order():
    """A reader starts at a folder's __init__.py: every module and subpackage beside it is named there once, and
    nothing that is not there (a data folder, such as serve/page/, may be named too). The order is the author's."""
    problems = []
    for init in sorted(p for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts):
        folder, listed = init.parent, reading_order(init)
        present = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"} | \
            {f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()}
        missing = sorted(present - set(listed))
        absent = sorted(n for n in listed if not ((folder / n[:-1]).is_dir() if n.endswith("/")
                                                  else (folder / n).is_file()))
        twice = sorted({n for n in listed if listed.count(n) > 1})
        if missing or absent or twice:
            problems.append(f"{init.relative_to(PACKAGE.parent)}: not listed {missing}, listed but not there "
                            f"{absent}, listed twice {twice}")
    assert problems == [], "\n".join(problems)


def test_dotted_paths_written_in_strings_name_what_exists():
    """A module path kept as text (the sweep's fork-server preload list, a test's monkeypatch target) is not
    checked by any import; one left behind by a move would fail quietly (the preload skips what it cannot import)."""
    known = modules()
    stale = []
    for root in (PACKAGE, PACKAGE.parent / "tests", PACKAGE.parent / "scripts"):
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                    continue
                text = node.value
                if not text.startswith("glm53.") or not all(p.isidentifier() for p in text.split(".")):
                    continue
                module, rest = text, []
                while module not in known and "." in module:
                    module, rest = module.rsplit(".", 1)[0], [module.rsplit(".", 1)[1]] + rest
                defined = module in known and (not rest or (len(rest) == 1
                                                            and rest[0] in top_level_names(known[module])))
                if not defined:
                    stale.append(f"{path.relative_to(PACKAGE.parent)}: {text}")
    assert stale == []


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


if __name__ == "__main__":
    graph = import_graph()
    print(floor_plan(graph))
    print("longest modules:", ", ".join(f"{p.relative_to(PACKAGE)} {n}" for n, p in
                                        sorted(((line_count(p), p) for p in modules().values()), reverse=True)[:5]))
    print("longest functions:", ", ".join(f"{name} {n}" for n, name in longest_functions()))


def test_imports_by_name_are_edges_of_the_graph():
    """An arrow up by name fails the floor test as an import statement would: the reader counts the names given to
    import_module and __import__ and the names kept in registries, and not prose or file paths."""
    known = modules()
    source = ("import importlib\n"
              "def f():\n"
              "    importlib.import_module('glm53.decode.text_generation')\n"
              "    __import__('glm53.decode.engine')\n"
              "HOMES = {'GLM53': 'glm53.model.model', 'run': 'glm53.train.rl:rl_train'}\n"
              "NOTES = ['glm53.cli is the command', 'glm53/run.py', 'glm53.decode.']\n")
    assert imports_of(source, "glm53.runtime.files", False, known) == {
        "glm53.decode.text_generation", "glm53.decode.engine", "glm53.model.model", "glm53.train.rl"}
    graph = import_graph()
    assert {"glm53.train.rl", "glm53.decode.task_completions"} <= graph["glm53.sweep.executor"]  # its preload list
    assert {"glm53.model.model", "glm53.data.tokenizer"} <= graph["glm53"]  # the package face's lazy names
    up = dict(graph, **{"glm53.runtime.files": graph["glm53.runtime.files"] | {"glm53.decode.engine"}})
    assert "runtime -> decode" in arrows_up(folder_graph(up))
    assert "runtime -> decode" not in arrows_up(folder_graph(graph))


def test_no_glm53_name_is_built_at_run_time():
    """A module name made of pieces (f"glm53.{stage}", "glm53." + stage) hides its edge from the reader above;
    write the whole name, or have a higher floor provide the work (runtime/providers.py)."""
    built = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            first = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else \
                node.left if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) else None
            if isinstance(first, ast.Constant) and str(first.value).startswith("glm53."):
                built.append(f"{name}:{node.lineno}")
    assert built == []
