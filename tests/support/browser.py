"""Headless Chromium for the page tests: the DOM after rendering, and screenshots read pixel by pixel.

Debian's `chromium` (scripts/test installs it when missing). The PNG decoder below handles what Chromium
writes (8-bit RGB/RGBA, non-interlaced), so no imaging library is needed.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("the browser tests need Debian's chromium: apt-get install -y chromium (scripts/test does it)")
    return found


def dump_dom(url: str) -> str:
    done = subprocess.run(
        [chromium(), *FLAGS, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(url: str, path: Path, width: int = 1280, height: int = 1600) -> Counter[tuple[int, int, int]]:
    """Render `url` into `path` (PNG) and count its pixels by colour."""
    done = subprocess.run(
        [chromium(), *FLAGS, f"--window-size={width},{height}", f"--screenshot={path}", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert path.is_file(), done.stderr[-2000:]
    return pixels(path.read_bytes())


def pixels(png: bytes) -> Counter[tuple[int, int, int]]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            idat += data
    width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0), (depth, interlace)
    assert colour in (2, 6), colour
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    counts: Counter[tuple[int, int, int]] = Counter()
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        _unfilter(kind, line, previous, channels)
        for x in range(0, stride, channels):
            counts[(line[x], line[x + 1], line[x + 2])] += 1
        previous = line
    return counts


def _unfilter(kind: int, line: bytearray, previous: bytearray, bpp: int) -> None:
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = previous[i]
        corner = previous[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[i] = (line[i] + pred) & 0xFF


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)
