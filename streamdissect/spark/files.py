"""Which files a load names, and how they are packed into Spark partitions (on the driver).

A path is a file, a glob, or a directory (its files; with recursiveFileLookup, at any
depth), as Spark's own file sources take them; `pathGlobFilter` keeps the file names that
match. Packing: the largest files first, each into the partition with the fewest bytes so
far, one that is already at least `target` bytes left alone, so a big file is a partition of
its own, small ones share, and both cores stay busy to the end.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from dataclasses import dataclass

TARGET_BYTES = 128 << 20  # a partition of small files grows to about this much


@dataclass(frozen=True, slots=True)
class CaptureFile:
    path: str
    size: int


def list_files(paths: list[str], glob_filter: str | None = None,
               recursive: bool = False) -> list[CaptureFile]:  # fmt: skip
    """The files the paths name, each once, in a stable order; FileNotFoundError for a path
    that names nothing."""
    found: dict[str, int] = {}
    for path in paths:
        matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
        if not matches or not all(os.path.exists(m) for m in matches):
            raise FileNotFoundError(f"{path}: no such file or directory")
        for match in matches:
            for name in _files_under(match, recursive):
                if glob_filter is None or fnmatch.fnmatch(os.path.basename(name), glob_filter):
                    found.setdefault(name, os.path.getsize(name))
    return [CaptureFile(path, size) for path, size in sorted(found.items())]


def _files_under(path: str, recursive: bool) -> list[str]:
    if not os.path.isdir(path):
        return [path]
    if not recursive:
        return sorted(os.path.join(path, n) for n in os.listdir(path)
                      if os.path.isfile(os.path.join(path, n)))  # fmt: skip
    out = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        out += [os.path.join(root, n) for n in sorted(names)]
    return out


def pack(files: list[CaptureFile], slots: int, target: int = TARGET_BYTES) -> list[list[str]]:
    """The files in partitions: at least `slots` of them when there are that many files,
    largest files first into the lightest partition."""
    if not files:
        return []
    total = sum(f.size for f in files)
    count = max(min(len(files), slots), -(-total // max(target, 1)))
    count = -(-count // max(slots, 1)) * max(slots, 1)  # (whole rounds: no core left idle)
    bins: list[list[str]] = [[] for _ in range(min(count, len(files)))]
    weights = [0] * len(bins)
    for f in sorted(files, key=lambda f: (-f.size, f.path)):
        lightest = min(range(len(bins)), key=weights.__getitem__)
        bins[lightest].append(f.path)
        weights[lightest] += f.size
    return [sorted(b) for b in bins if b]
