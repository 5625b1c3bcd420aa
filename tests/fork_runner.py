"""Runs `zrodlo` commands for the fuzz test, one forked child a command, torch imported only once.

Each line on stdin is a JSON case {"args": [...], "cwd": "...", "timeout": seconds}. The runner forks,
and the child runs the console script's entry (`zrodlo.stages.cli.main`) in `cwd` with its stdout and
stderr sent to files; the parent kills a child that outlives its timeout. Each case answers one JSON
line on stdout: {"ended": "exit" | "signal" | "timeout", "code": n, "stdout": ..., "stderr": ...,
"peak_kib": the child's largest resident memory}.

A child is a process of its own, so a case that aborts in native code, hangs or leaks state cannot
touch the next one, and forking takes milliseconds where a new interpreter takes a second.

    python tests/fork_runner.py   (with OMP_NUM_THREADS=1, so that no thread pool precedes a fork)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time

import torch

from zrodlo.stages.cli import main


def run_child(args: list[str], cwd: str, out: int, err: int) -> None:
    """The child's whole life: run the command and leave with its exit status."""
    code = 0
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.chdir(cwd)
        sys.argv = ["zrodlo", *args]
        main()
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else (0 if exited.code is None else 1)
    except BaseException as error:  # anything else is what the fuzz test looks for
        print(f"Traceback (most recent call last): escaped main: {error!r}", file=sys.stderr)
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def run_case(args: list[str], cwd: str, timeout: float) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            run_child(args, cwd, out.fileno(), err.fileno())
        deadline = time.monotonic() + timeout
        peak = 0
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                peak = usage.ru_maxrss
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = None
                break
            time.sleep(0.005)
        out.seek(0)
        err.seek(0)
        result = {
            "stdout": out.read().decode("utf-8", "replace"),
            "stderr": err.read().decode("utf-8", "replace"),
            "peak_kib": peak,
        }
    if status is None:
        return {**result, "ended": "timeout", "code": None}
    if os.WIFSIGNALED(status):
        return {**result, "ended": "signal", "code": os.WTERMSIG(status)}
    return {**result, "ended": "exit", "code": os.WEXITSTATUS(status)}


if __name__ == "__main__":
    torch.set_num_threads(1)
    for line in sys.stdin:
        case = json.loads(line)
        answer = run_case(case["args"], case["cwd"], case["timeout"])
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
