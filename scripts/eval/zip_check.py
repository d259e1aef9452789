"""The rule every xsagpt command applies to a checkpoint before reading it
(src/util/zip_check.cpp), in Python, for scripts/eval/export.py: the same checks in the
same order with the same words, function by function, so that one file gets one verdict
from both (tests/python/eval/test_checkpoint_verdict.py holds them to it over damaged
copies of a real checkpoint).

Every checkpoint xsagpt writes is a zip archive; it must have end records whose numbers
agree with each other and locate a central directory ending where they begin, and every
record stored, named alike in its local header and the central directory, within the
file and matching its CRC-32.
Python's zipfile is no substitute: it reads the zip64 end record alone (PyTorch writes
both), forgives an archive that starts late and reads the directory by its size rather
than its count, so a changed byte there passes it while xsagpt refuses the file.
"""
from __future__ import annotations

import pathlib
import struct
import zlib


class Unreadable(Exception):
    """The archive's directory cannot be read at all (truncated, not a zip archive)."""


EOCD, ZIP64_END, ZIP64_LOCATOR = 0x06054B50, 0x06064B50, 0x07064B50
CENTRAL, LOCAL = 0x02014B50, 0x04034B50
DIR_FIELDS = ("record count", "size", "offset")
SATURATED = (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)  # "see the zip64 end record"


class ZipBytes:
    """The archive's bytes, read at offsets: a read past the end is a directory that
    points outside the file."""

    def __init__(self, f, size: int):
        self.f, self.size = f, size

    def read_at(self, offset: int, n: int) -> bytes:
        if offset > self.size or n > self.size - offset:
            raise Unreadable("short read")
        self.f.seek(offset)
        return self.f.read(n)

    def crc_at(self, offset: int, n: int) -> int:
        self.f.seek(offset)
        got = 0
        while n > 0:
            chunk = self.f.read(min(n, 1 << 20))
            if not chunk:
                raise Unreadable("short read")
            got, n = zlib.crc32(chunk, got), n - len(chunk)
        return got


def _u(fmt: str, b: bytes, at: int) -> int:
    return struct.unpack_from("<" + fmt, b, at)[0]


def read_zip64_end(f: ZipBytes, locator: int, fields: tuple) -> tuple[str | None, tuple]:
    """The zip64 end record the locator in front of the end-of-central-directory record
    points to, checked against that record's numbers (`fields`), which it replaces."""
    at = _u("Q", f.read_at(locator + 8, 8), 0)
    if at > locator or locator - at < 56:
        raise Unreadable("no zip64 end record where its locator points")
    z = f.read_at(at, 56)
    if _u("I", z, 0) != ZIP64_END:
        raise Unreadable("no zip64 end record where its locator points")
    if _u("I", z, 16) != 0 or _u("I", z, 20) != 0:
        return "the zip64 end record names a disk other than the first", ()
    if _u("Q", z, 24) != _u("Q", z, 32):
        return f"the zip64 end record counts {_u('Q', z, 24)} records on its disk and {_u('Q', z, 32)} in all", ()
    z64 = (_u("Q", z, 32), _u("Q", z, 40), _u("Q", z, 48))
    for name, field, sat, value in zip(DIR_FIELDS, fields, SATURATED, z64):
        if field != sat and field != value:
            return (f"the end-of-central-directory record gives the central directory's {name} as {field}, its "
                    f"zip64 end record as {value}"), ()
    return None, (*z64, at)


def locate_directory(f: ZipBytes) -> tuple[str | None, tuple]:
    """The end-of-central-directory record (the last one in the final 64 KiB + 22
    bytes), its zip64 end record when it has one, and the central directory they
    locate, which must end where they begin: (damage, (entries, size, offset, end))."""
    if f.size < 22:
        raise Unreadable("shorter than an end-of-central-directory record")
    tail_len = min(f.size, 65536 + 22)
    tail_at = f.size - tail_len
    tail = f.read_at(tail_at, tail_len)
    i = tail.rfind(struct.pack("<I", EOCD), 0, tail_len - 22 + 4)
    if i < 0:
        raise Unreadable("no end-of-central-directory record (not a zip archive, as xsagpt writes, or one cut short)")
    eocd = tail_at + i
    after, comment = f.size - eocd - 22, _u("H", tail, i + 20)
    if after != comment:
        return f"{after} bytes follow the end-of-central-directory record, whose comment is {comment} bytes", ()
    if _u("H", tail, i + 4) != 0 or _u("H", tail, i + 6) != 0:
        return "the end-of-central-directory record names a disk other than the first", ()
    if _u("H", tail, i + 8) != _u("H", tail, i + 10):
        return (f"the end-of-central-directory record counts {_u('H', tail, i + 8)} records on its disk and "
                f"{_u('H', tail, i + 10)} in all"), ()
    fields = (_u("H", tail, i + 10), _u("I", tail, i + 12), _u("I", tail, i + 16))
    d = (*fields, eocd)
    if i >= 20 and _u("I", tail, i - 20) == ZIP64_LOCATOR:
        damage, d = read_zip64_end(f, eocd - 20, fields)
        if damage:
            return damage, ()
    elif any(field == sat for field, sat in zip(fields, SATURATED)):
        raise Unreadable("no zip64 end record, which the end-of-central-directory record refers to")
    entries, size, offset, end = d
    if offset > end or end - offset != size:
        return (f"the central directory (byte {offset}, {size} bytes) does not end where the end records begin "
                f"(byte {end})"), ()
    return None, d


def read_entry(cd: bytes, at: int) -> tuple[dict, int]:
    """The central directory's entry at `at`, and where the next one starts."""
    if at + 46 > len(cd) or _u("I", cd, at) != CENTRAL:
        raise Unreadable("corrupt central directory")
    e = {"method": _u("H", cd, at + 10), "crc": _u("I", cd, at + 16), "csize": _u("I", cd, at + 20),
         "usize": _u("I", cd, at + 24), "local": _u("I", cd, at + 42)}
    name_len, extra_len, comment_len = _u("H", cd, at + 28), _u("H", cd, at + 30), _u("H", cd, at + 32)
    if at + 46 + name_len + extra_len + comment_len > len(cd):
        raise Unreadable("corrupt central directory")
    e["name"] = cd[at + 46:at + 46 + name_len]
    # zip64: the fields saturated at 0xffffffff follow in the extra field 0x0001, in this order.
    extra_end = at + 46 + name_len + extra_len
    x = at + 46 + name_len
    while x + 4 <= extra_end:
        kind, n = _u("H", cd, x), _u("H", cd, x + 2)
        if kind == 0x0001:
            f = x + 4
            for key in ("usize", "csize", "local"):
                if e[key] == 0xFFFFFFFF and f + 8 <= x + 4 + n:
                    e[key], f = _u("Q", cd, f), f + 8
        x += 4 + n
    return e, extra_end + comment_len


def _shown(name: bytes) -> str:
    """A record's name for messages, bytes that are not UTF-8 as \\xNN (util/utf8.h)."""
    return name.decode("utf-8", errors="backslashreplace")


def check_record(f: ZipBytes, e: dict) -> str | None:
    """One record against its central directory entry: stored, named alike in its local
    header, within the file, and matching its CRC-32."""
    shown = _shown(e["name"])
    if e["method"] != 0:
        return f"record '{shown}': compressed (method {e['method']}), which xsagpt never writes"
    if e["csize"] != e["usize"]:
        return f"record '{shown}': stored, yet its sizes differ ({e['csize']} and {e['usize']} bytes)"
    fits = e["local"] <= f.size and f.size - e["local"] >= 30
    lh = f.read_at(e["local"], 30) if fits else bytes(30)
    if _u("I", lh, 0) != LOCAL:
        return f"record '{shown}': no local header at byte {e['local']}, where the central directory places it"
    # Each record's name is written twice, in its local header and in the central
    # directory, from one string: two that differ are bytes changed since, even where
    # no CRC covers them.
    name_at = e["local"] + 30
    data_at = name_at + _u("H", lh, 26) + _u("H", lh, 28)
    if data_at > f.size:
        return f"record '{shown}': runs past the end of the file (truncated)"
    local = f.read_at(name_at, _u("H", lh, 26))
    if local != e["name"]:
        return (f"record '{shown}': its local header names it '{_shown(local)}' (the two copies of a record's name "
                "differ)")
    if e["csize"] > f.size - data_at:
        return f"record '{shown}': runs past the end of the file (truncated)"
    got = f.crc_at(data_at, e["csize"])
    if got != e["crc"]:
        return f"record '{shown}': CRC-32 {e['crc']:08x} stored, {got:08x} computed over its {e['csize']} bytes"
    return None


def zip_damage(path: pathlib.Path) -> str | None:
    """The first thing that breaks the rule, as bytes changed since the file was
    written, or None. Raises Unreadable for a file whose zip directory cannot be read
    at all; OSError as reading does."""
    with open(path, "rb") as fh:
        f = ZipBytes(fh, fh.seek(0, 2))
        damage, found = locate_directory(f)
        if damage:
            return damage
        entries, size, offset, _ = found
        cd = f.read_at(offset, size)
        at = 0
        for _ in range(entries):
            e, at = read_entry(cd, at)
            damage = check_record(f, e)
            if damage:
                return damage
        if at != len(cd):
            return f"the central directory holds {len(cd) - at} bytes after its {entries} records"
    return None
