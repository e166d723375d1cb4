"""`--hardware FILE`: a saved `trl-advisor probe --json` report read back, bounded and validated.

The reading (a regular file, at most MAX_REPORT_BYTES, strict UTF-8, JSON without NaN or deep nesting) happens
here with advisor.safeio; hw_probe.report_from_data validates the document. Both errors become InputFileError: a
one-line usage error with a hint, exit 2.
"""

from __future__ import annotations

import os

from advisor import safeio
from advisor.errors import InputFileError

MAX_REPORT_BYTES = 4 * 1024 * 1024
"""4 MiB: a probe report of an 8-GPU machine is about 10 KiB (tests/fixtures/hardware); 1,024 GPUs with every link
listed stay under 4 MiB."""


def load_report(path: str | os.PathLike[str]):
    """The hw_probe.HardwareReport in `path`; InputFileError when the file is missing, not a regular file, too
    large, not UTF-8 JSON, not a report of this schema, or has numbers no real machine has."""
    import hw_probe

    try:
        text = safeio.read_text(path, max_bytes=MAX_REPORT_BYTES, what="hardware file")
        data = safeio.load_json(text, where=os.fspath(path))
    except safeio.UnsafeInputError as exc:
        raise InputFileError(exc.message, hint=hw_probe.PROBE_HINT) from None
    try:
        return hw_probe.report_from_data(data, where=os.fspath(path))
    except hw_probe.ReportError as exc:
        raise InputFileError(exc.message, hint=exc.hint) from None
