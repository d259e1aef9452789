"""stages.json: what a results folder's earlier calls did, the memory that lets a
second call skip what the first one measured.

    {"STAGE": {"status": "done" | "failed" | "pending", "reason": "...", "at": "...", "seconds": S}, ...}

It is written whole or not at all (a temporary file renamed over it), so a call cut off
by the device's limit or kill -9 leaves the state of its last finished stage. It is read
strictly: a file that is no such mapping was damaged outside the verdict (a hand edit,
a bundle unpacked in part), and taking it for "nothing done yet" would spend minutes of
a lease measuring again what may be measured already. Damage is refused with the file
and what is wrong named (StateDamaged): a refusal costs one call's seconds and loses
nothing, and the bundle every call brings back holds the last good copy.

It is read only as a regular file (a symlink to one included) of at most MAX_BYTES, nested
at most MAX_DEPTH deep: the verdict's own file is a few KiB, two levels deep, so anything
else was put there by hand or by accident, and reading it as it is could hang (a FIFO with
no writer), exhaust memory (a link to /dev/zero) or end in a RecursionError. The file's
type is read without opening it, then again on what was opened (without blocking), so a
file swapped in between is caught too."""
import itertools
import json
import os
import pathlib
import re
import stat

STATUSES = ("done", "failed", "pending")
MAX_BYTES = 1 << 20
MAX_DEPTH = 16


class StateDamaged(Exception):
    """A stages.json that cannot be the verdict's state; the message says how to go on."""


def _damaged(path: pathlib.Path, what: str) -> StateDamaged:
    return StateDamaged(
        f"{path} is damaged ({what}). It records which stages are done; read as empty it would run every stage "
        f"again. Nothing was run or changed. Put back the copy from the last results bundle "
        f"({path.parent.name}/stages.json in {path.parent.name}-results.tgz), or start afresh with --reset "
        f"(which deletes {path.parent} and its scratch folder)")


def read_state(path: pathlib.Path) -> dict:
    """The state in `path`, {} when there is none yet; StateDamaged when it is not a
    JSON object of stages, each an object with a known status."""
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        state = json.loads(_bounded_text(path))
    except OSError as e:
        raise _damaged(path, f"cannot be read: {e.strerror or e}") from None
    except ValueError as e:  # also a file cut short, and bytes that are no UTF-8
        raise _damaged(path, f"not JSON: {e}") from None
    if not isinstance(state, dict):
        raise _damaged(path, f"a JSON {type(state).__name__}, not an object of stages")
    for name, entry in state.items():
        status = entry.get("status") if isinstance(entry, dict) else None
        if status not in STATUSES:
            raise _damaged(path, f"stage {name!r} has no status among {', '.join(STATUSES)}: {json.dumps(entry)[:80]}")
    return state


def _kind(mode: int) -> str | None:
    """What a file that is not a regular one is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), "not a regular file")


def _bounded_text(path: pathlib.Path) -> str:
    """The file's text, when it is a regular file of at most MAX_BYTES nested at most MAX_DEPTH
    deep; StateDamaged naming what it is otherwise (OSError when it cannot be read)."""
    if kind := _kind(os.stat(path).st_mode):
        raise _damaged(path, f"{kind}{' (through a symlink)' if path.is_symlink() else ''}, not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there since the stat does not block the open
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if kind := _kind(st.st_mode):
            raise _damaged(path, f"{kind}, not a regular file")
        if st.st_size > MAX_BYTES:
            raise _damaged(path, f"{st.st_size} bytes, more than the {MAX_BYTES} bytes a state may hold")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:  # grown since the fstat
        raise _damaged(path, f"more than the {MAX_BYTES} bytes a state may hold (it grew while read)")
    text = data.decode()
    if (depth := _depth(text)) > MAX_DEPTH:
        raise _damaged(path, f"nested {depth} deep, more than the {MAX_DEPTH} levels a state may hold")
    return text


def _depth(text: str) -> int:
    """How deep the brackets of a JSON text nest, its strings left out (a bracket in one is text)."""
    brackets = re.sub(r'"(?:[^"\\]|\\.)*"|[^][{}]', "", text)
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def tmp_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_suffix(".tmp")


def write_state(path: pathlib.Path, state: dict) -> None:
    tmp = tmp_path(path)
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(path)
