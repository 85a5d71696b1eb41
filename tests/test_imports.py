"""No import circle among the project's own modules, and their imports at module level (read with `ast`, nothing
imported). The project's modules: the package `modeling_simplified/`, `conversion/` and `hub_cards/` (which install
as `modeling_simplified.conversion` / `.hub_cards`, pyproject's package-dir) and the checkout's tools (`benchmarks/`, `experiments/`, `examples/`)."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

# A function-level import of a project module is allowed only here, as "module: imported module" with the reason.
# The shipped Hub files (configuration_simplified.py, modeling_simplified.py and its siblings) import only flat
# siblings and never training code, so none of them needs an entry; add one only where a cycle cannot be broken or
# a command must answer before a heavy import.
ALLOWED_FUNCTION_LEVEL: dict[str, str] = {
    "modeling_simplified.training.cli: modeling_simplified.training.api": "the training stack (Trainer, datasets, "
    "matplotlib) loads once the arguments are read: `--help` and bad options answer without it",
    "modeling_simplified.training.glue_cli: modeling_simplified.training.glue": "the same for `simplified-glue`: "
    "its `--help` and bad options answer from the task table (`glue_tasks`) before the fine-tuning code loads",
    "modeling_simplified.training.glue: modeling_simplified.training.api": "the same for `simplified-glue`: the "
    "training stack loads for the first fine-tuning run, after the tasks and seeds are checked",
    "modeling_simplified.hub_cards.cli: modeling_simplified.hub_cards.export": "`simplified-export` reads its "
    "arguments before the export code (torch, transformers, the model) loads: `--help` and typos answer at once",
    "modeling_simplified.hub_cards.cli: modeling_simplified.hub_cards.card": "the same (the card's weights dtype)",
    "modeling_simplified.hub_cards.cli: modeling_simplified.hub_cards.push": "the same for `simplified-push`",
    "modeling_simplified.conversion.cli: modeling_simplified.conversion.run": "the same for `simplified-convert`",
    "modeling_simplified.conversion: modeling_simplified.conversion.common": "the converters' names load on first "
    "use (PEP 562), so that the CLI module imports without torch",
    "modeling_simplified.conversion: modeling_simplified.conversion.hf": "the same",
    "modeling_simplified.conversion: modeling_simplified.conversion.original": "the same",
    "modeling_simplified: modeling_simplified.configuration_simplified": "the package's names load on first use "
    "(PEP 562), so that importing one of its modules (a console command's) does not import torch and transformers",
    "modeling_simplified: modeling_simplified.modeling_simplified": "the same: the model classes register on first use",
    "modeling_simplified.training.presets: modeling_simplified.configuration_simplified": "presets are read and "
    "checked against the config's fields as written in its source; transformers loads only to build a config, so "
    "`simplified-train --help`, `--list-presets` and `--show` answer without it",
}
#: the checkout's tools: plain folders that import the installed package
TOOLS = ("benchmarks", "experiments", "examples")


def _package_dirs() -> dict[str, Path]:
    """Package name -> folder: pyproject's package-dir, plus the checkout's tools (not installed)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = {name: ROOT / folder for name, folder in setuptools["package-dir"].items()}
    for tool in TOOLS:
        dirs[tool] = ROOT / tool
    return dirs


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the project's packages (sub-folders included)."""
    modules: dict[str, Path] = {}
    for package, folder in _package_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if name in modules and modules[name] != path:
                raise AssertionError(f"{name} is both {modules[name]} and {path}")
            modules[name] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, at function level) for each project import in the module's file. `from X
    import a` names X.a when that is a module of the project, else X (its `__init__`); importing a.b.c also runs the
    packages a and a.b, which count unless they are packages of this module itself (already being imported)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in child.names
                ]
            else:
                visit(child, nested)
                continue
            for target in dict.fromkeys(targets):
                if target not in modules:
                    if target.split(".")[0] in {"modeling_simplified", *TOOLS}:
                        raise AssertionError(f"{path}:{child.lineno}: {target} is no module of the project")
                    continue
                parts = target.split(".")
                for ancestor in (".".join(parts[:i]) for i in range(1, len(parts))):
                    if ancestor in modules and not f"{name}.".startswith(f"{ancestor}."):
                        found.append((ancestor, child.lineno, in_function))
                found.append((target, child.lineno, in_function))

    visit(tree, False)
    return found


@functools.cache  # parsed once for the tests below (read only)
def _graph() -> tuple[dict[str, set[str]], list[str]]:
    """The import graph (module -> modules it imports, function-level imports included) and the function-level
    project imports as 'file:line: module imports target'."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    function_level = []
    for name, path in modules.items():
        for target, line, in_function in _imports(name, path, modules):
            if target != name:
                graph[name].add(target)
            if in_function and f"{name}: {target}" not in ALLOWED_FUNCTION_LEVEL:
                function_level.append(f"{path.relative_to(ROOT)}:{line}: {name} imports {target} in a function")
    return graph, function_level


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None (depth-first search, iterative)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_graph_covers_the_project():
    graph, _ = _graph()
    assert {"modeling_simplified", "modeling_simplified.training.cli", "modeling_simplified.conversion.cli"} <= set(
        graph
    )
    assert {"modeling_simplified.hub_cards.export", "benchmarks.raptr"} <= set(graph)
    assert {"experiments.reproduce.run", "examples.demo"} <= set(graph)
    assert "modeling_simplified.training.api" in graph["experiments.reproduce.jobs"]
    assert "modeling_simplified.optimization" in graph["modeling_simplified.training.trainer"]


def test_no_import_circle():
    cycle = _cycle(_graph()[0])
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_project_imports_are_at_module_level():
    _, function_level = _graph()
    assert not function_level, "project imports inside functions:\n" + "\n".join(function_level)


def test_the_cycle_search_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_relative_and_function_level_imports_are_resolved(tmp_path):
    path = tmp_path / "raptr.py"
    path.write_text(
        "from . import cli\nfrom ..modeling_simplified import LayerPlan\n\ndef f():\n    from .trainer import X\n"
    )
    modules = {
        name: tmp_path / "x.py"
        for name in ("modeling_simplified", "modeling_simplified.modeling_simplified")
        + tuple(f"modeling_simplified.training.{m}" for m in ("cli", "raptr", "trainer"))
    }
    assert _imports("modeling_simplified.training.raptr", path, modules) == [
        ("modeling_simplified.training.cli", 1, False),
        ("modeling_simplified.modeling_simplified", 2, False),
        ("modeling_simplified.training.trainer", 5, True),
    ]


def test_the_package_and_its_commands_module_import_without_torch():
    """`import modeling_simplified.commands` (every console command's entry) imports neither torch nor transformers:
    the package's names load on first use, when each one resolves and the Auto classes know the family."""
    code = (
        "import sys\n"
        "import modeling_simplified, modeling_simplified.commands\n"
        "assert not {'torch', 'transformers'} & set(sys.modules), sorted(set(sys.modules) & {'torch', 'transformers'})\n"
        "for name in modeling_simplified.__all__:\n"
        "    getattr(modeling_simplified, name)\n"
        "from transformers import AutoConfig\n"
        "assert type(AutoConfig.for_model('simplified')).__name__ == 'SimplifiedConfig'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_commands_quick_answers_import_neither_torch_nor_transformers():
    """`simplified-train --help`, `--list-presets`, `--show NAME` and a mistyped option read the presets and the
    block types (`fields_simplified`, the source of the config's fields), `simplified-glue` the task table
    (`glue_tasks`); `simplified-export`, `-push` and `-convert` read their arguments before their work's module loads.
    None imports the model stack: each answers in the time of a Python start, not of importing torch."""
    code = (
        "import contextlib, io, sys\n"
        "from modeling_simplified.training.cli import main\n"
        "from modeling_simplified.training.glue_cli import main as glue\n"
        "from modeling_simplified.hub_cards.cli import export_main, push_main\n"
        "from modeling_simplified.conversion.cli import main as convert\n"
        "for command, argv in ((main, ['--help']), (main, ['--list-presets']), (main, ['--show', 'codeparrot-sas']),\n"
        "                      (main, ['--bogus']), (glue, ['--help']), (glue, ['--bogus']), (export_main, ['--help']),\n"
        "                      (export_main, ['--bogus']), (push_main, ['--help']), (push_main, []),\n"
        "                      (convert, ['--help']), (convert, ['gpt2-to-simplfied', 'a', 'b'])):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "        try:\n"
        "            command(argv)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "assert not {'torch', 'transformers'} & set(sys.modules), sorted(set(sys.modules) & {'torch', 'transformers'})\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
