"""A JPEG file's structure, read without decoding it: how many scans it has, and whether its
markers are where the format puts them.

    scans = count_scans(data)  # JpegStructureError when a marker is out of place

A JPEG is a chain of marker segments (0xFF, a code, a 2-byte length, the payload). After each
start-of-scan (SOS, 0xFFDA) comes entropy-coded data with no length: it runs to the next
marker, and inside it 0xFF is always followed by 0x00 (a stuffed byte) or a restart marker
(RST0..RST7, in turn). So the walk follows the lengths between scans and, inside a scan,
looks only at 0xFF bytes; it never mistakes scan data for a marker.

Why both checks matter:
- Scans: a progressive JPEG refines the image in scans, and each scan makes the decoder pass
  over every block again. Encoders write about 10 (libjpeg's default script; 6 in grayscale),
  but nothing in the format stops a file from repeating a scan thousands of times: 3,000
  redundant scans in 389 KB cost 10 s of CPU to decode.
- Misplaced markers: Pillow hides libjpeg's warnings (its error manager drops them and never
  reads the warning count), so bytes overwritten in the scan data decode "fine" to a
  garbled picture. Garbage there almost always holds a 0xFF followed by a byte no encoder
  writes, or throws the restart markers out of turn; libjpeg warns "Corrupt JPEG data" for
  exactly these, and here they are errors. Garbage with no 0xFF at all escapes this check.
"""

from __future__ import annotations

import re

SOI, EOI, SOS, DRI = 0xD8, 0xD9, 0xDA, 0xDD
RESTARTS = range(0xD0, 0xD8)
# Frame headers (SOF0..SOF15 but DHT, JPG and DAC): one per image, before the first scan.
FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# What may follow a scan: the next scan, the tables it uses, comments, DNL, or the end.
AFTER_SCAN = frozenset({SOS, EOI, DRI, 0xC4, 0xCC, 0xDB, 0xDC, 0xFE, *range(0xE0, 0xF0)})
# A marker, or fill bytes before one, inside scan data: 0xFF and a byte that is not 0x00.
# (A literal first byte lets the regex engine skip ahead fast: 20x faster than "\xff+".)
_MARKER_IN_SCAN = re.compile(rb"\xff[^\x00]")
_FILL = re.compile(rb"\xff+")  # a marker may follow any number of 0xFF bytes


class JpegStructureError(ValueError):
    """A marker where the format allows none: the file is corrupt."""


def count_scans(data: bytes, stop_after: int | None = None) -> int:
    """The number of scans (SOS segments) before the end-of-image marker, or `stop_after`
    + 1 once there are more than that. A file that ends early is counted as far as it goes:
    whether it is truncated is the decoder's call."""
    if data[:2] != b"\xff\xd8":
        raise JpegStructureError("no start-of-image marker")
    scans, restart_interval, offset = 0, 0, 2
    while offset + 1 < len(data):
        if data[offset] != 0xFF:
            raise JpegStructureError(f"{data[offset]:#04x} where a marker belongs at {offset}")
        offset = _last_fill_byte(data, offset)
        if offset + 1 >= len(data):
            break
        marker = data[offset + 1]
        if marker == EOI:
            break
        if marker == SOI or marker in RESTARTS or marker < 0xC0:
            raise JpegStructureError(f"marker {marker:#04x} outside scan data at {offset}")
        if scans and marker in FRAMES:
            raise JpegStructureError(f"a second frame header at {offset}")
        payload = offset + 4
        end = offset + 2 + int.from_bytes(data[offset + 2 : payload], "big")
        if marker == DRI:
            restart_interval = int.from_bytes(data[payload : payload + 2], "big")
        if marker != SOS:
            offset = end
            continue
        scans += 1
        if stop_after is not None and scans > stop_after:
            break
        offset = _end_of_scan_data(data, end, restart_interval)
    return scans


def _end_of_scan_data(data: bytes, start: int, restart_interval: int) -> int:
    """Where the entropy-coded data starting at `start` ends: the offset of the marker after
    it (len(data) when the file ends first), with restart markers checked on the way."""
    expected = 0
    offset = start
    while found := _MARKER_IN_SCAN.search(data, offset):
        at = _last_fill_byte(data, found.start())
        if at + 1 >= len(data):
            break
        marker = data[at + 1]
        if marker == 0x00:  # fill bytes before a stuffed zero: still data
            offset = at + 2
        elif marker in RESTARTS:
            if not restart_interval or marker != RESTARTS[expected]:
                raise JpegStructureError(f"restart marker {marker:#04x} out of turn at {at}")
            expected = (expected + 1) % len(RESTARTS)
            offset = at + 2
        elif marker in AFTER_SCAN:
            return at
        else:
            raise JpegStructureError(f"marker {marker:#04x} in scan data at {at}")
    return len(data)


def _last_fill_byte(data: bytes, offset: int) -> int:
    """The offset of the last 0xFF of the run starting at `offset` (the one before a marker)."""
    return _FILL.match(data, offset).end() - 1
