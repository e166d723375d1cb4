"""Writing a rows file (the JSON list bench.run --rows-file reads) without replacing anyone's file, and a probe's
results file in place, whole or not at all; the checks and the header the probes share."""

from __future__ import annotations

import json
from pathlib import Path


def new_output_problem(path: str) -> str | None:
    """Why a probe cannot write its results to `path` (None when it can): a file already there is never replaced,
    and a missing folder is found before the probe runs for minutes, not when it first saves."""
    import os

    if os.path.exists(path):
        return f"{path} exists; choose a new file (a probe never overwrites one)"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"{path}: no folder {folder}; create it first"
    if not os.access(folder, os.W_OK):
        return f"{path}: cannot write into {folder}"
    return None


def write_new(path: Path, rows: list[dict], *, same_ok: bool = False) -> str | None:
    """Create `path` with `rows`; None when written, else a one-line reason. An existing file is never replaced:
    with same_ok, one that already holds exactly these rows counts as written (a run resumed with the same --out)."""
    text = json.dumps(rows, indent=1) + "\n"
    try:
        with path.open("x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        try:
            if same_ok and path.read_text(encoding="utf-8") == text:
                return None
        except OSError:
            pass
        return f"{path} exists; name a new file"
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def save_json(path: str, obj) -> None:
    """Write `obj` to `path` through a temporary file and a rename: a probe that saves after every case and is cut
    short by its time limit leaves the last whole file, never half of one."""
    import os

    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def check_models(ap, flag: str, names: list[str]) -> None:
    """Stop the probe with a usage error (argparse's exit 2) naming the first catalogue id it does not know, with
    the catalogue's suggestion, before anything heavy is imported."""
    from bench.models import resolve

    for name in names:
        try:
            resolve(name)
        except Exception as exc:  # the catalogue's unknown-name error, with its suggestion
            ap.error(f"{flag}: {exc}")


def probe_header(module: str, argv: list[str] | None) -> dict:
    """The command that ran a probe and the versions it ran with: the first keys of every probe's results file."""
    import platform
    import sys

    import torch
    import transformers

    return {"command": f"python -m {module} " + " ".join(argv if argv is not None else sys.argv[1:]),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version()}}
