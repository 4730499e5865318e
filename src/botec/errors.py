"""Errors a user can fix. Their ``str()`` is one line naming the field and what was expected;
the CLI prints it and exits with code 2."""

from __future__ import annotations

__all__ = ["ContractError", "UserError", "read_text_file", "write_text_atomically"]


class UserError(Exception):
    """A problem the user can fix (a file that exists, an unknown quantity name); one line."""


class ContractError(UserError, ValueError):
    """A contract that cannot be used; ``str()`` is one line naming the field and the expectation."""

    def __init__(self, message: str, field: str | None = None, origin: str | None = None):
        self.field = field
        self.origin = origin
        self.detail = message
        parts = [p for p in (origin, field) if p]
        super().__init__(": ".join(parts + [message]))


def read_text_file(path, what: str = "file", max_bytes: int | None = None) -> str:
    """The UTF-8 text of ``path``, or a one-line :class:`ContractError` (missing, unreadable, not text, too large).

    ``max_bytes``: refuse a file larger than this before reading it whole: its size is checked first, and at
    most ``max_bytes + 1`` characters are read (a device such as ``/dev/zero`` or a FIFO has no size to check).
    """
    import os
    from pathlib import Path

    origin = str(path)
    too_large = f"the {what} is larger than {max_bytes:,} bytes; is it the right file?" if max_bytes else ""
    try:
        if max_bytes is None:
            return Path(path).read_text(encoding="utf-8")
        if os.stat(path).st_size > max_bytes:
            raise ContractError(too_large, origin=origin)
        with open(path, encoding="utf-8") as file:
            text = file.read(max_bytes + 1)
        if len(text) > max_bytes:
            raise ContractError(too_large, origin=origin)
        return text
    except FileNotFoundError:
        raise ContractError(f"no such {what}", origin=origin) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError(f"cannot read the {what} ({error.__class__.__name__}: {error})", origin=origin) from None


def write_text_atomically(path, text: str, option: str = "-o/--output") -> None:
    """Write ``text`` to ``path`` (what ``-o/--output`` names), whole or not at all, respecting what is there.

    - a regular file, or a new path: written to a uniquely named temporary file in the same folder,
      flushed to disk, then renamed over the path (and the folder flushed, so that the rename is durable too),
      so a reader sees the old or the new text and
      writers running at once never trip over each other; an existing file keeps its permission bits;
    - a symlink: written through to its target (the link stays a link);
    - a device, a FIFO, a socket, ``/dev/stdout`` and the like: written directly, never replaced
      (``/dev/null`` stays a device); ``-``: stdout;
    - a directory, or any failure (permission, missing folder, full disk): one line naming
      ``option`` and the path, a :class:`UserError`.
    """
    import os
    import stat
    import sys
    import tempfile
    from pathlib import Path

    def failure(reason) -> UserError:
        return UserError(f"{option}: {path}: cannot write ({reason})")

    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    data = text.encode("utf-8")
    descriptor = _descriptor_alias(str(path))
    if descriptor is not None:  # /dev/stdout, /dev/fd/3: the process's own stream, not a file to replace
        stream = {1: sys.stdout, 2: sys.stderr}.get(descriptor)
        try:
            if stream is not None:
                stream.write(text)
                stream.flush()
            else:
                view = memoryview(data)
                while view:
                    view = view[os.write(descriptor, view):]
        except OSError as error:
            raise failure(error.strerror or error) from None
        return
    try:
        mode = os.stat(path).st_mode  # follows a symlink
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise failure(error.strerror or error) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise failure("it is a directory")
    if mode is not None and not stat.S_ISREG(mode):  # a device, a FIFO, a socket: write into it
        try:
            with open(path, "wb") as stream:
                stream.write(data)
        except OSError as error:
            raise failure(error.strerror or error) from None
        return
    target = Path(os.path.realpath(path))  # a symlink (even a dangling one): the file it points to
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(temporary, target)
        temporary = None
    except OSError as error:
        raise failure(error.strerror or error) from None
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass
    _sync_folder(target.parent)


def _sync_folder(folder) -> None:
    """Flush a folder's entries to disk, so that a rename into it survives a power loss (POSIX makes the rename
    durable only once its directory is synced; the file's own fsync does not cover it). Best effort: a file
    system or platform that cannot open or sync a directory (Windows, some network mounts) is left as it is."""
    import os

    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _descriptor_alias(path: str) -> int | None:
    """The file descriptor that ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names."""
    import re

    named = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
    if path in named:
        return named[path]
    match = re.fullmatch(r"/(?:dev|proc/self)/fd/(\d+)", path)
    return int(match.group(1)) if match else None


def _umask() -> int:
    """The process's umask (the permission bits a new file does not get)."""
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask
