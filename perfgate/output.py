"""Every file perfgate writes goes through :func:`write_output` or :func:`open_output`.

What happens depends on what the path names (after following symbolic links):

=====================================  ==================================================
nothing yet, or a regular file         a temporary file in the same folder is written,
                                       flushed to disk and renamed over the path, so a
                                       reader sees the old file or the whole new one; an
                                       existing file keeps its mode (and its owner, where
                                       perfgate may set it)
a symbolic link to a regular file      the same for the file it points at; the link stays
a character device or FIFO             written in place, appended (``/dev/null``,
(``/dev/null``, ``/dev/stdout``,       ``/dev/stderr``, a named pipe); never replaced,
a pipe)                                never truncated
``/proc/self/fd/N``, ``/dev/stdout``   written in place whatever it points at: it is an
and other links through ``/proc``      open file of a process, not a name to replace
``-``                                  standard output (``--json - | jq``); a command that
                                       writes a report there prints nothing else on it
a directory, a block device, a         refused: :class:`~perfgate.errors.OutputError`
socket, a dangling link                (exit 2)
=====================================  ==================================================

:func:`check_distinct` refuses, before any work is done, an output that is also an input
of the same command (``--output`` naming the ``--current`` file), or two outputs that are
the same file. Every :class:`OSError` becomes an :class:`~perfgate.errors.OutputError`
naming the path, with the reason of :func:`perfgate.errors.os_error_text`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from perfgate.errors import OutputError, os_error_text

__all__ = [
    "STDOUT",
    "append_output",
    "check_distinct",
    "is_replaceable",
    "open_output",
    "output_file",
    "to_stdout",
    "write_output",
    "write_outputs",
]

STDOUT = "-"  # the path that means standard output


def to_stdout(path: Path | str | None) -> bool:
    """Whether ``path`` is :data:`STDOUT`, the name of standard output."""
    return path is not None and str(path) == STDOUT


_MAX_LINKS = 40  # as the kernel's limit on symbolic links followed in one lookup


def _hops(path: Path) -> tuple[Path, bool]:
    """The path a chain of symbolic links ends at, and whether the chain passes through /proc.

    ``/dev/stdout`` -> ``/proc/self/fd/1`` -> ``/work/out.log`` ends at a regular file, but
    it is the process's open file (perhaps opened for appending), not a name to replace.
    """
    current = Path(path).absolute()
    through_proc = False
    for _ in range(_MAX_LINKS):
        # the folders on the way may be links themselves (/dev/fd -> /proc/self/fd)
        current = current.parent.resolve() / current.name
        if current.parts[1:2] == ("proc",):
            through_proc = True
        if not current.is_symlink():
            return current, through_proc
        current = current.parent / current.readlink()
    raise OutputError(os_error_text(OSError(errno.ELOOP, "")), source=str(path))


def _mode_for_new() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def _atomic(target: Path, existing: os.stat_result | None) -> Iterator[BinaryIO]:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
                with contextlib.suppress(OSError):  # only root (or the owner, for the group) may
                    os.fchown(fd, existing.st_uid, existing.st_gid)
            else:
                os.fchmod(fd, _mode_for_new())  # mkstemp makes 0600; a report is as readable as any file
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


FIFO_WAIT_SECONDS = 10.0  # how long an output FIFO may wait for its reader (docs/limits.md)


def _open_in_place(path: Path, flags: int) -> int:
    """Open a device or FIFO for writing without waiting forever for a reader that may never come.

    A FIFO opened with ``O_NONBLOCK`` and no reader fails at once (``ENXIO``): the open is
    retried for :data:`FIFO_WAIT_SECONDS` (a reader started a moment after perfgate is
    fine), then refused instead of blocking the command forever. Once open, writes block
    again as usual.
    """
    deadline = time.monotonic() + FIFO_WAIT_SECONDS
    while True:
        try:
            fd = os.open(path, flags | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() >= deadline:
                raise OutputError(
                    f"is a FIFO that nobody read within {FIFO_WAIT_SECONDS:g} s; start its reader first, "
                    "or write a file",
                    source=str(path),
                ) from None
            time.sleep(0.05)
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def _in_place(path: Path) -> Iterator[BinaryIO]:
    fd = _open_in_place(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "wb") as handle:
        yield handle
        handle.flush()


def _refuse_folder_name(path: Path | str) -> None:
    """A path written with a trailing slash (``--output reports/``) names a folder, never a file."""
    text = os.fspath(path)
    if text.endswith(("/", os.sep)) and not to_stdout(text):
        if Path(text).is_dir():
            raise OutputError("is a directory; give the path of a file", source=text)
        raise OutputError("ends with '/', so it names a folder; give the path of a file in it", source=text)


def _refuse(path: Path, what: str) -> OutputError:
    return OutputError(f"is {what}; perfgate writes only regular files, FIFOs and character devices", source=str(path))


@contextlib.contextmanager
def _open(path: Path) -> Iterator[BinaryIO]:
    try:
        own = path.lstat()
    except FileNotFoundError:
        own = None
    if own is None or stat.S_ISREG(own.st_mode):
        with _atomic(path, own) as handle:
            yield handle
        return
    final, through_proc = _hops(path) if stat.S_ISLNK(own.st_mode) else (path, False)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise OutputError(
            f"is a symbolic link to {final}, which does not exist; remove the link or create its target",
            source=str(path),
        ) from None
    if stat.S_ISREG(info.st_mode) and not through_proc:
        with _atomic(final, info) as handle:
            yield handle
        return
    if stat.S_ISREG(info.st_mode) or stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
        with _in_place(path) as handle:
            yield handle
        return
    if stat.S_ISDIR(info.st_mode):
        raise OutputError("is a directory; give the path of a file", source=str(path))
    if stat.S_ISBLK(info.st_mode):
        raise _refuse(path, "a block device")
    if stat.S_ISSOCK(info.st_mode):
        raise _refuse(path, "a socket")
    raise _refuse(path, "neither a file nor a device")


@contextlib.contextmanager
def open_output(path: Path | str) -> Iterator[BinaryIO]:
    """A binary handle whose bytes end up at ``path`` as the table above says.

    For a regular file nothing is visible until the ``with`` block ends without an error;
    an error inside it leaves any earlier file as it was.

    Raises:
        OutputError: the path is refused or cannot be written; the message names it.
    """
    target = Path(path)
    if str(path) == "":
        raise OutputError("an empty path; give the file to write")
    _refuse_folder_name(path)
    if to_stdout(path):
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        with _open(target) as handle:
            yield handle
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write: {os_error_text(exc)}", source=str(target)) from None


def output_file(text: str) -> Path:
    """The argparse type of every flag that names a file to write.

    ``Path("reports/")`` drops the slash, so ``--output reports/`` would write a file named
    ``reports``; a name that ends with a slash names a folder, and is refused here.
    """
    if text.endswith(("/", os.sep)) and text != "/":
        raise argparse.ArgumentTypeError(f"{text!r} ends with '/', so it names a folder; give the path of a file")
    return Path(text)


def write_output(path: Path | str, data: str | bytes) -> None:
    """Write ``data`` (text is UTF-8) to ``path`` through :func:`open_output`."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with open_output(path) as handle:
        handle.write(payload)


def write_outputs(items: Sequence[tuple[Path | str, str | bytes]]) -> None:
    """Write several outputs of one command all or nothing (a check's Markdown, JSON, HTML and comment).

    Every regular file is written to its temporary file and flushed before any is renamed
    into place, so a failure (a full disk, a folder that cannot be created) leaves every
    earlier file as it was. Streams (standard output, devices, FIFOs) cannot be taken back:
    they are written last, once every file has been written.
    """
    ordered = sorted(items, key=lambda item: not is_replaceable(item[0]))  # files first, streams last
    with contextlib.ExitStack() as stack:
        for path, data in ordered:
            payload = data.encode("utf-8") if isinstance(data, str) else data
            handle = stack.enter_context(open_output(path))
            try:
                handle.write(payload)
                handle.flush()
            except OSError as exc:
                raise OutputError(f"cannot write: {os_error_text(exc)}", source=str(path)) from None


def append_output(path: Path | str, data: str) -> None:
    """Append ``data`` to ``path`` (``$GITHUB_STEP_SUMMARY``), creating a missing file.

    Appending never replaces anything, so links are followed and devices written; a
    directory, block device or socket is refused as by :func:`open_output`.
    """
    target = Path(path)
    if str(path) == "":
        raise OutputError("an empty path; give the file to append to")
    _refuse_folder_name(path)
    try:
        try:
            info = target.stat()
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise OutputError("is a directory; give the path of a file", source=str(target))
        if info is not None and stat.S_ISBLK(info.st_mode):
            raise _refuse(target, "a block device")
        if info is not None and stat.S_ISSOCK(info.st_mode):
            raise _refuse(target, "a socket")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOCTTY | os.O_CLOEXEC
        fd = (
            _open_in_place(target, flags)
            if info is not None and stat.S_ISFIFO(info.st_mode)
            else os.open(target, flags, 0o666)
        )
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8"))
    except OSError as exc:
        raise OutputError(f"cannot append: {os_error_text(exc)}", source=str(target)) from None


def is_replaceable(path: Path | str) -> bool:
    """Whether :func:`open_output` would write ``path`` as a regular file (new or replaced).

    A command that writes companion files beside its output (the trained model beside a
    run file) writes them only then: ``--output /dev/null`` must not create ``/dev/null.model.pt``.
    """
    if to_stdout(path):
        return False
    target = Path(path)
    try:
        own = target.lstat()
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    if stat.S_ISREG(own.st_mode):
        return True
    if not stat.S_ISLNK(own.st_mode):
        return False
    try:
        _final, through_proc = _hops(target)
        return stat.S_ISREG(target.stat().st_mode) and not through_proc
    except (OSError, OutputError):
        return False


def _identity(path: Path) -> tuple[object, ...] | None:
    """What makes two paths the same file for this check; None for devices and FIFOs.

    Writing a report to ``/dev/stdout`` while reading a run from ``/dev/stdin`` is fine (they
    may be the same terminal); only regular files, existing or about to be created, clash.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        return ("new", os.path.realpath(path))
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(info.st_mode):
        return ("file", info.st_dev, info.st_ino)
    return None


def _refuse_early(path: Path) -> None:
    """The refusals of :func:`open_output` that need no writing to find out."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise OutputError(
                "is a symbolic link to a path that does not exist; remove the link or create its target",
                source=str(path),
            ) from None
        return
    except OSError as exc:
        raise OutputError(f"cannot write: {os_error_text(exc)}", source=str(path)) from None
    if stat.S_ISDIR(info.st_mode):
        raise OutputError("is a directory; give the path of a file", source=str(path))
    if stat.S_ISBLK(info.st_mode):
        raise _refuse(path, "a block device")
    if stat.S_ISSOCK(info.st_mode):
        raise _refuse(path, "a socket")


def check_distinct(outputs: Mapping[str, Path | str | None], inputs: Mapping[str, Path | str | None]) -> None:
    """Refuse an output that is also an input, or two outputs that are one file.

    ``outputs`` and ``inputs`` map the flag (``--output``) to its path (None: not given).

    Raises:
        OutputError: naming both flags and the path.
    """
    seen: dict[tuple[object, ...], str] = {}
    for flag, path in inputs.items():
        if path is None or str(path) == "":
            continue
        key = _identity(Path(path))
        if key is not None and key[0] == "file":
            seen.setdefault(key, flag)
    outputs_seen: dict[tuple[object, ...], str] = {}
    on_stdout = ""
    for flag, path in outputs.items():
        if path is None or str(path) == "":
            continue
        if to_stdout(path):
            if on_stdout:
                raise OutputError(
                    f"{flag} and {on_stdout} both write to standard output; give one of them a file", source=STDOUT
                )
            on_stdout = flag
            continue
        _refuse_folder_name(path)
        _refuse_early(Path(path))  # before any work, so that no other output is written first
        key = _identity(Path(path))
        if key is None:
            continue
        if key in seen:
            raise OutputError(
                f"{flag} names the same file as the input {seen[key]}; write the output elsewhere",
                source=str(path),
            )
        if key in outputs_seen:
            raise OutputError(
                f"{flag} names the same file as {outputs_seen[key]}; give each output its own file",
                source=str(path),
            )
        outputs_seen[key] = flag
