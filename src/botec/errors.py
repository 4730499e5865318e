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


def read_text_file(path, what: str = "file") -> str:
    """The UTF-8 text of ``path``, or a one-line :class:`ContractError` (missing, unreadable, not text)."""
    from pathlib import Path

    origin = str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractError(f"no such {what}", origin=origin) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError(f"cannot read the {what} ({error.__class__.__name__}: {error})", origin=origin) from None


def write_text_atomically(path, text: str) -> None:
    """Write ``text`` through a temporary file renamed into place: the file appears whole or not at all."""
    import os
    from pathlib import Path

    path = Path(path)
    temporary = path.with_name(f".{path.name}.botec-tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as error:
        raise UserError(f"{path}: cannot write ({error.strerror or error})") from None
    finally:
        temporary.unlink(missing_ok=True)
