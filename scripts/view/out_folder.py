"""The output folders of the view scripts, made in one place: plot.py's figures folder and
track.py's TensorBoard folders. One that cannot be made (under a file, under /proc or /sys,
on a read-only disk, a file in its place) is one line naming it and the cause, which each
script prints as its own error (exit 2), never a traceback."""
from __future__ import annotations

import pathlib


def folder_problem(path: pathlib.Path, what: str) -> str | None:
    """Makes `path` and its parents; None once it is there, else why not, naming it as `what`."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"{path}: cannot make the {what} ({e.strerror or e})"
    return None
