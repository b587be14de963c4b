"""One error root for everything mage-tune reports to a user.

Each error carries where it happened (file and, for text inputs, line) so the CLI can print one line and exit 2
without a traceback.
"""

from __future__ import annotations


class MageError(Exception):
    """Root of every error mage-tune raises on purpose."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}"


class InputError(MageError):
    """A file or argument the user gave cannot be read as what it claims to be."""


class ToolchainError(MageError):
    """A compiler or binary tool is missing or failed."""


class CompileError(ToolchainError):
    """Source that does not compile; the message holds the compiler's own log."""


class ConfigError(MageError):
    """A kernel configuration outside its space: unknown knob, bad value, forbidden combination."""


class NoDeviceError(MageError):
    """A GPU step was asked for where no GPU is present."""


class MeasureError(MageError):
    """A measurement session could not run at all (as opposed to one config failing, which is a result)."""
