"""The code each stage of dvc.yaml lists, written from the imports: the commands a stage's `cmd`
runs, looked up in the `zrodlo` command line, and every module of the project those commands
import, directly or through other modules, at the top of a module or inside a function; for a
command run with `--params`, the code that reads its options from params.yaml too (which knows the
schedule's shares and the keys each tokenizer kind takes). So an edit anywhere in that code reruns
the stage, and an edit elsewhere reruns nothing.

    .venv/bin/python .ci/stage_code.py          # rewrite the code lines of every stage (make stage-code)
    .venv/bin/python .ci/stage_code.py --check  # exit 1 naming the stages whose lines are stale

The code lines of a stage are the `- src/...py` and `- stages/...py` entries at the end of its
`deps`; everything else in dvc.yaml, comments included, is kept as written.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# The package's folders: the command line installs as zrodlo.stages from stages/.
PACKAGES = {"zrodlo.stages": ROOT / "stages", "zrodlo": ROOT / "src" / "zrodlo"}
CODE_LINE = re.compile(r"^\s+- (?:src|stages)/\S+\.py$")


def command_module(words: list[str]) -> str:
    """The module of the function that `zrodlo <words...>` runs."""
    from zrodlo.stages.cli import app

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
    """The project modules a file imports anywhere in it, a package's __init__ with each of its
    modules (importing `zrodlo.data.tokenizer.char` runs `zrodlo.data.tokenizer` first)."""
    found = set()
    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    parents = {name.rsplit(".", depth)[0] for name in found for depth in range(1, name.count("."))}
    return {name for name in found | parents if (path := module_file(name)) and path.is_file()}


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


def commands(cmd: str) -> list[list[str]]:
    """The `zrodlo` commands in a stage's cmd, each as its words up to its first flag (`--params
    FILE` before them kept as `--params`), wherever the shell runs them: after `&&`, in `$(...)`
    or in a branch of an `if`."""
    found = []
    for part in re.split(r"&&|;|\$\(|\bthen\b|\belse\b", cmd):
        words = shlex.split(part.strip().rstrip(")"))
        if not words or words[0] != "zrodlo":
            continue
        taken = ["--params"] if words[1:2] == ["--params"] else []
        rest = words[3:] if taken else words[1:]
        found.append(taken + [word for word in rest[:2] if not word.startswith("-")])
    return found


def stage_code(stage: dict) -> list[str]:
    """The code files a stage (a foreach stage: its template) runs, stages/ first, each sorted:
    its commands' and, where they take their options from params.yaml, the code that reads them."""
    needed: set[str] = set()
    for words in commands(stage.get("do", stage)["cmd"]):
        if words[0] == "--params":
            needed |= code_of("zrodlo.stages.params")
            words = words[1:]
        needed |= code_of(command_module(words))
    return sorted(needed, key=lambda path: (not path.startswith("stages/"), path))


def written(text: str) -> str:
    """dvc.yaml's text with each stage's code lines those its commands run."""
    stages = yaml.safe_load(text)["stages"]
    lines = text.splitlines()
    out: list[str] = []
    stage, at = None, 0
    while at < len(lines):
        line = lines[at]
        out.append(line)
        at += 1
        header = re.match(r"^  ([A-Za-z0-9_-]+):\s*$", line)
        stage = header.group(1) if header else stage
        deps = re.match(r"^(\s+)deps:\s*$", line)
        if not (deps and stage in stages):
            continue
        entry = deps.group(1) + "  - "
        while at < len(lines) and (
            lines[at].startswith(entry) or lines[at].lstrip().startswith("#")
        ):
            if not CODE_LINE.match(lines[at]):
                out.append(lines[at])
            at += 1
        out.extend(entry + path for path in stage_code(stages[stage]))
    return "\n".join(out) + "\n"


def main() -> int:
    path = ROOT / "dvc.yaml"
    text = path.read_text()
    wanted = written(text)
    if "--check" in sys.argv[1:]:
        if wanted == text:
            return 0
        print("dvc.yaml lists other code than its stages run: make stage-code writes it")
        return 1
    path.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
