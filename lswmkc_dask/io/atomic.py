"""Atomic outputs: write under a temporary sibling name, rename when complete."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

__all__ = ["atomic_path"]


@contextlib.contextmanager
def atomic_path(path, overwrite=False):
    """Yield a temporary sibling of ``path``; rename it to ``path`` on success.

    Nothing is left at ``path`` (nor the temporary) if the body raises.

    Parameters
    ----------
    path : str or Path
        Final file or directory name.
    overwrite : bool
        Replace an existing ``path``; otherwise an existing ``path`` is an error.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False (checked before and after).
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"output {path} already exists (pass overwrite=True or --overwrite to replace it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if path.exists():
            if not overwrite:
                raise FileExistsError(f"output {path} appeared while writing; left it untouched")
            trash = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, trash)
            os.replace(tmp, path)
            _remove(trash)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            _remove(tmp)


def _remove(p):
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
