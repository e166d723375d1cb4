"""Writing a bundle folder: all files at once or none, never over files the user owns.

(Moved out of advisor.generate: rendering is pure, writing touches the disk.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from advisor.errors import OutputExistsError

_EXECUTABLE = {"launch.sh", "slurm.sbatch", "train.py"}


def write_bundle(files: dict[str, str], out_dir: str, *, force: bool) -> list[str]:
    """Write every file into out_dir at once: a temporary sibling folder is filled, then renamed into place.

    An existing non-empty out_dir is refused without `force`; with `force` the old folder is renamed aside and
    deleted only after the new one is in place. Any failure leaves no partial folder and the old one intact.
    Returns the written paths (out_dir/name), in bundle order.
    """
    target = Path(out_dir)
    if target.exists() and not target.is_dir():
        raise OutputExistsError(f"{out_dir} exists and is not a folder", hint="choose another --out")
    existing = target.is_dir() and any(target.iterdir())
    if existing and not force:
        raise OutputExistsError(f"{out_dir} already exists and is not empty",
                                hint="pass --force to replace it, or choose another --out")
    for name in files:
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"write_bundle: {name!r} is not a plain file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    aside: Path | None = None
    try:
        for name, content in files.items():
            path = staging / name
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(content)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(path, 0o755 if name in _EXECUTABLE else 0o644)
        os.chmod(staging, 0o755)
        if target.exists():
            aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rmdir(aside)
            os.rename(target, aside)
        try:
            os.rename(staging, target)
        except BaseException:
            if aside is not None:
                os.rename(aside, target)  # put the old bundle back
                aside = None
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return [str(target / name) for name in files]
