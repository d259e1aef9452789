"""stages.json: what a results folder's earlier calls did, the memory that lets a
second call skip what the first one measured.

    {"STAGE": {"status": "done" | "failed" | "pending", "reason": "...", "at": "...", "seconds": S}, ...}

It is written whole or not at all (a temporary file renamed over it), so a call cut off
by the device's limit or kill -9 leaves the state of its last finished stage. It is read
strictly: a file that is no such mapping was damaged outside the verdict (a hand edit,
a bundle unpacked in part), and taking it for "nothing done yet" would spend minutes of
a lease measuring again what may be measured already. Damage is refused with the file
and what is wrong named (StateDamaged): a refusal costs one call's seconds and loses
nothing, and the bundle every call brings back holds the last good copy."""
import json
import pathlib

STATUSES = ("done", "failed", "pending")


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
    if path.is_dir():
        raise _damaged(path, "a directory, not a file")
    try:
        state = json.loads(path.read_text())
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


def tmp_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_suffix(".tmp")


def write_state(path: pathlib.Path, state: dict) -> None:
    tmp = tmp_path(path)
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(path)
