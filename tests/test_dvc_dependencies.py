"""dvc.yaml lists all the code each stage runs, so that an edit anywhere in it reruns the stage.

The code of a stage is derived, not listed by hand: the commands its `cmd` calls, looked up in the
`zrodlo` command line, and every module of the project those commands import, directly or through
other modules, at the top of a module or inside a function.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import yaml

from zrodlo.stages.cli import app

ROOT = Path(__file__).resolve().parent.parent
# The package's folders: the command line installs as zrodlo.stages from stages/.
PACKAGES = {"zrodlo.stages": ROOT / "stages", "zrodlo": ROOT / "src" / "zrodlo"}


def command_module(words: list[str]) -> str:
    """The module of the function that `zrodlo <words...>` runs."""
    for group in app.registered_groups:
        if group.name == words[0]:
            commands = group.typer_instance.registered_commands
            return next(c.callback for c in commands if c.name == words[1]).__module__
    return next(c.callback for c in app.registered_commands if c.name == words[0]).__module__


def module_file(module: str) -> Path | None:
    """The file of a module of this project, or None for any other module."""
    package = next((p for p in PACKAGES if module == p or module.startswith(p + ".")), None)
    if package is None:
        return None
    rest = module[len(package) + 1 :]
    path = PACKAGES[package].joinpath(*rest.split(".")) if rest else PACKAGES[package]
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"


def imported_modules(file: Path) -> set[str]:
    """The project modules a file imports anywhere in it (`from zrodlo.stages import options` included)."""
    found = set()
    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if (path := module_file(name)) and path.is_file()}


def code_of(module: str) -> set[str]:
    """Every file of the project that `module` runs, as paths relative to the repository."""
    seen: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(imported_modules(module_file(name)))
    files = {module_file(name) for name in seen}
    # A package's __init__ that holds only its docstring (and version) runs no code of a stage.
    return {path.relative_to(ROOT).as_posix() for path in files if not is_only_words(path)}


def is_only_words(path: Path) -> bool:
    """Whether a package's __init__ holds nothing but its docstring and constants."""
    if path.name != "__init__.py":
        return False
    body = ast.parse(path.read_text()).body
    return all(isinstance(node, ast.Expr | ast.Assign) for node in body)


def stages() -> dict[str, dict]:
    """Each stage of dvc.yaml, a foreach stage by its template."""
    declared = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {name: stage.get("do", stage) for name, stage in declared.items()}


def commands(cmd: str) -> list[list[str]]:
    """The `zrodlo` commands in a stage's cmd, each as its command words (without flags), wherever
    the shell runs them: after `&&`, in `$(...)` or in a branch of an `if`."""
    found = []
    for part in re.split(r"&&|;|\$\(|\bthen\b|\belse\b", cmd):
        words = shlex.split(part.strip().rstrip(")"))
        if words and words[0] == "zrodlo":
            found.append([word for word in words[1:3] if not word.startswith("-")])
    assert found, cmd
    return found


@pytest.mark.parametrize("name", sorted(stages()))
def test_a_stage_lists_all_the_code_its_commands_run(name):
    stage = stages()[name]
    needed = set()
    for words in commands(stage["cmd"]):
        needed |= code_of(command_module(words))
    listed = {dep for dep in stage["deps"] if dep.endswith(".py")}
    assert sorted(needed - listed) == [], f"dvc.yaml stage {name} does not list them"
    assert sorted(listed - needed) == [], f"dvc.yaml stage {name} lists code it does not run"
