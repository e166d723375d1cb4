"""Every error a user can see, and the exit code each maps to. The CLI is the only place that catches them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    """`check` found an error, `generate` found no feasible plan, or `verify` failed."""
    USAGE = 2
    """Bad flag, unknown model or GPU, unreadable file, a value that cannot be written safely."""
    INTERNAL = 3
    """An unexpected exception: a bug. One line on stderr names the file holding the traceback."""


class AdvisorError(Exception):
    """A problem caused by the input. Printed as one line plus a hint, never as a traceback."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details: dict = {}
        """What a --json caller gets besides the message and hint (generate's request and rejected plans)."""


class UnknownNameError(AdvisorError):
    """A model, GPU or rule name that is not in a catalogue."""


class InputFileError(AdvisorError):
    """A file given on the command line is missing, unreadable or malformed."""


class NotBuiltError(AdvisorError):
    """A command that exists in the contract but is not implemented in this version."""


class NoFeasiblePlanError(AdvisorError):
    """`generate` searched every candidate and none fits; the hint names the smallest change that makes one."""

    exit_code = ExitCode.FINDINGS


class OutputExistsError(AdvisorError):
    """The output folder exists and `--force` was not given."""
