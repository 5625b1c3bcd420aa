"""How outputs come into being: checked first, written under a temporary name, renamed into place.

A command that refuses leaves nothing behind, and a crash never leaves something that looks complete:
the final name appears only through an atomic rename of a fully written and synced directory or file.
Leftover temporaries of a killed process are named `.<name>.partial-<pid>` and are removed the next time
the same output is written. A write the operating system refuses (a full disk, a read-only
directory) removes its temporary and raises a `WriteFailure` that names the output, not the temporary.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from zrodlo.storage.refusal import Refusal, WriteFailure

_PARTIAL = ".partial-"


def check_new_directory(path: Path) -> None:
    """Refuse an output directory that exists or whose missing parents cannot be made."""
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise Refusal(
                f"{path} already exists; Zrodlo writes a new directory and overwrites nothing"
            )
        raise Refusal(f"{path} exists and is not a directory; Zrodlo writes a new directory")
    check_parent(path)


def check_new_file(path: Path) -> None:
    """Refuse an output file that exists or whose missing parents cannot be made."""
    if path.exists() or path.is_symlink():
        raise Refusal(f"{path} already exists; Zrodlo writes a new file and overwrites nothing")
    check_parent(path)


def check_replaceable(path: Path) -> None:
    """Refuse a file output that `replace_file` could not put in place: a directory, or one whose
    missing parents cannot be made."""
    if path.is_dir():
        raise Refusal(f"{path} is a directory; Zrodlo writes a file there, so name a file")
    check_parent(path)


def check_parent(path: Path) -> None:
    """Refuse an output whose missing parent directories cannot be made (as DVC makes them): a
    file on the way where a directory would be, or the nearest directory on the way one this
    process cannot write in (a read-only file system), before anything is written."""
    ancestor = path.absolute().parent
    while not (ancestor.exists() or ancestor.is_symlink()):
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        shown = path.parent if ancestor == path.absolute().parent else ancestor
        raise Refusal(
            f"{path} cannot be written: {shown} is not a directory, so it cannot hold the output"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        read_only = os.statvfs(ancestor).f_flag & os.ST_RDONLY
        code = errno.EROFS if read_only else errno.EACCES
        raise WriteFailure(path, OSError(code, os.strerror(code)))


@contextlib.contextmanager
def parents_made(path: Path) -> Iterator[None]:
    """Make the missing parent directories of `path` for the block; if the block fails, remove
    those made here again, so that a failed write leaves no empty directories behind."""
    missing, parent = [], path.absolute().parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    try:
        try:
            for directory in reversed(missing):
                directory.mkdir(exist_ok=True)
        except OSError as error:
            raise WriteFailure(path, error) from None
        yield
    except BaseException:
        for directory in missing:  # the deepest first; one that holds something else stays
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


def check_in_place(path: Path) -> None:
    """Refuse a file a command would write in place (a run's records) that is a symbolic link or
    no regular file: what is written there would land elsewhere, or never on disk."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise Refusal(f"{path} is a symbolic link; {_IN_PLACE}, never through a link")
    if not stat.S_ISREG(mode):
        raise Refusal(f"{path} is no regular file; {_IN_PLACE}")


_IN_PLACE = "Zrodlo appends records only to regular files"


def open_in_place(path: Path, flags: int) -> int:
    """A descriptor of `path` opened with `flags` (os.O_RDWR, os.O_WRONLY | os.O_APPEND), created if
    missing, never through a symbolic link and never anything but a regular file, whatever was
    put there since `check_in_place`."""
    nofollow = flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, nofollow, 0o644)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            check_in_place(path)  # says which
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        check_in_place(path)
        raise Refusal(f"{path} is no regular file; {_IN_PLACE}")
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def directory_of_files(path: Path) -> Iterator[Path]:
    """A directory that files are replaced in, created if missing; if it was created here and the
    block fails, it is removed again, so a failed write leaves no empty directory behind."""
    created = not path.exists()
    with parents_made(path):
        try:
            path.mkdir(exist_ok=True)
        except OSError as error:
            raise WriteFailure(path, error) from None
        try:
            yield path
        except BaseException:
            if created:
                shutil.rmtree(path, ignore_errors=True)
            raise


def partial_name(path: Path) -> Path:
    """The temporary sibling an output is built under before it is renamed into place."""
    return path.parent / f".{path.name}{_PARTIAL}{os.getpid()}"


def is_partial(path: Path) -> bool:
    """Whether `path` is a temporary that an output was (or is being) built under."""
    head, marker, pid = path.name.rpartition(_PARTIAL)
    return head.startswith(".") and bool(marker) and pid.isdigit()


def remove_directory(path: Path) -> None:
    """Delete a directory so that a kill midway never leaves it half there under its own name:
    it is renamed to a temporary first, which the next run's clean-up removes if need be."""
    doomed = partial_name(path)
    os.rename(path, doomed)
    sync_directory(path.absolute().parent)
    shutil.rmtree(doomed)


def remove_leftovers(path: Path) -> None:
    """Remove temporaries that killed processes left for this output."""
    prefix = f".{path.name}{_PARTIAL}"
    with contextlib.suppress(FileNotFoundError):
        for entry in path.parent.iterdir():
            if entry.name.startswith(prefix):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_partials(directory: Path) -> None:
    """Remove every temporary in `directory` whose writing process no longer runs."""
    with contextlib.suppress(FileNotFoundError):
        for entry in directory.iterdir():
            if is_partial(entry) and not _running(int(entry.name.rpartition(_PARTIAL)[2])):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)


def sync_directory(path: Path) -> None:
    """fsync a directory so the names inside it (a rename, a new file) survive a power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(root: Path) -> None:
    for entry in sorted(root.rglob("*")):
        if entry.is_file():
            with open(entry, "rb+") as handle:
                os.fsync(handle.fileno())
    for directory in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
        sync_directory(directory)


def _discard(partial: Path) -> None:
    """Remove a temporary file, if the file system lets it (a read-only one may not)."""
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)


def _refused_write(error: BaseException, temporary: Path) -> bool:
    """Whether `error` is the operating system refusing a write under `temporary` (an error naming
    another file, an input read inside the block, passes through as it is)."""
    if not isinstance(error, OSError) or isinstance(error, WriteFailure):
        return False
    named = error.filename
    return named is None or Path(named).absolute().is_relative_to(temporary.absolute())


@contextlib.contextmanager
def new_directory(path: Path) -> Iterator[Path]:
    """Yield an empty temporary directory that becomes `path` when the block ends without error.

    On any exception (a refusal included) the temporary is removed and `path` never appears.
    """
    check_new_directory(path)
    remove_leftovers(path)
    partial = partial_name(path)
    with parents_made(path):
        try:
            partial.mkdir()
            yield partial
            _sync_tree(partial)
            os.rename(partial, path)
            sync_directory(path.absolute().parent)
        except BaseException as error:
            shutil.rmtree(partial, ignore_errors=True)
            if _refused_write(error, partial):
                raise WriteFailure(path, error) from None
            raise


@contextlib.contextmanager
def new_file(path: Path) -> Iterator[Path]:
    """Yield a temporary file path that becomes `path` when the block ends without error."""
    check_new_file(path)
    remove_leftovers(path)
    partial = partial_name(path)
    with parents_made(path):
        try:
            yield partial
            with open(partial, "rb+") as handle:
                os.fsync(handle.fileno())
            os.rename(partial, path)
            sync_directory(path.absolute().parent)
        except BaseException as error:
            _discard(partial)
            if _refused_write(error, partial):
                raise WriteFailure(path, error) from None
            raise


def replace_file(path: Path, data: bytes) -> None:
    """Write `path` whole, replacing any earlier file: a synced temporary renamed over it, so a
    reader sees the old bytes or the new ones, never half of them."""
    path = Path(path)
    check_replaceable(path)
    remove_leftovers(path)
    partial = partial_name(path)
    with parents_made(path):
        try:
            # A new file, never through a link someone left at the temporary's name.
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(partial, path)
            sync_directory(path.absolute().parent)
        except OSError as error:
            _discard(partial)
            raise WriteFailure(path, error) from None
        except BaseException:
            _discard(partial)
            raise
