"""What a kernel's PTX and cubin say about its entry point, read without any CUDA tool: the
parameter list (types and sizes, in order), the threads per block it was compiled for, and the
architecture. An AOT package's launch plan is checked against these before any GPU work
(tiledsl/interop/package_check.py), so a manifest cannot pass a cubin fewer, more or other parameters
than it takes.

The cubin is an ELF file (machine EM_CUDA). Its section `.nv.info.<kernel>` is a list of
attributes (one format byte, one attribute byte, then a value whose size the format gives);
EIATTR_KPARAM_INFO describes one parameter (ordinal, offset, size), EIATTR_REQNTID the block.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

EM_CUDA = 190
_KPARAM_INFO, _REQNTID = 0x17, 0x10
_VALUE_BYTES = {0x01: 0, 0x02: 1, 0x03: 2}  # EIFMT_NVAL, BVAL, HVAL; SVAL (0x04) says its size
PTX_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}


class CubinError(ValueError):
    """The PTX or cubin is not what it should be (its message says how)."""


@dataclass(frozen=True)
class Entry:
    """One entry point: its parameters as (PTX type such as ".u64 .ptr" or ".f32", bytes), the
    threads per block it requires (None if it does not say) and the architecture number."""

    params: tuple[tuple[str, int], ...]
    threads: int | None
    sm: int


def ptx_entry(ptx: str, name: str) -> Entry:
    """The `.entry name(...)` of the PTX text."""
    m = re.search(rf"\.entry\s+{re.escape(name)}\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise CubinError(f"the PTX has no entry point {name}")
    params = []
    for decl in m.group(1).split(","):
        p = re.match(r"\s*\.param\s+\.([bsuf])(8|16|32|64)\b(\s+\.ptr)?", decl)
        if p is None:
            raise CubinError(f"the PTX entry {name} has a parameter PTX reads as {decl.strip()!r}")
        params.append((f".{p.group(1)}{p.group(2)}{' .ptr' if p.group(3) else ''}",
                       PTX_SIZES[p.group(2)]))
    threads = re.search(r"\)\s*\.reqntid\s+(\d+)", ptx[m.start():m.end() + 200])
    target = re.search(r"^\s*\.target\s+sm_(\d+)a?\b", ptx, re.M)
    if target is None:
        raise CubinError("the PTX names no .target architecture")
    return Entry(tuple(params), int(threads.group(1)) if threads else None, int(target.group(1)))


def cubin_entry(cubin: bytes, name: str) -> Entry:
    """The parameters (as ("", size): a cubin records no types), block and SM of kernel `name`
    in the cubin."""
    try:
        return _cubin_entry(cubin, name)
    except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as e:
        if isinstance(e, CubinError):
            raise
        raise CubinError("the cubin is truncated or malformed (an ELF structure points past "
                         "its end)") from None


def _cubin_entry(cubin: bytes, name: str) -> Entry:
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise CubinError("the cubin is not a 64-bit little-endian ELF file")
    (machine,) = struct.unpack_from("<H", cubin, 18)
    if machine != EM_CUDA:
        raise CubinError(f"the cubin's ELF machine is {machine}, not CUDA ({EM_CUDA})")
    (flags,) = struct.unpack_from("<I", cubin, 48)
    sm = (flags >> 8) & 0xFF if cubin[8] >= 8 else flags & 0xFF  # ELF ABI 8 moved the field
    info = _section(cubin, f".nv.info.{name}")
    params: dict[int, int] = {}
    threads = None
    for attr, value in _attributes(info):
        if attr == _KPARAM_INFO and len(value) >= 12:
            _, ordinal, _, packed = struct.unpack_from("<IHHI", value)
            params[ordinal] = (packed >> 18) & 0x3FFF
        elif attr == _REQNTID and len(value) >= 4:
            (threads,) = struct.unpack_from("<I", value)
    if sorted(params) != list(range(len(params))):
        raise CubinError(f"the cubin's parameter ordinals of {name} are not 0..n-1")
    return Entry(tuple(("", params[i]) for i in range(len(params))), threads, sm)


def _section(elf: bytes, wanted: str) -> bytes:
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    size, count, names = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * size) for i in range(count)]
    strtab = headers[names]
    for h in headers:
        start = strtab[4] + h[0]
        if elf[start:elf.index(b"\0", start)].decode(errors="replace") == wanted:
            if h[4] + h[5] > len(elf):
                raise CubinError(f"the cubin's section {wanted} runs past its end")
            return elf[h[4]:h[4] + h[5]]
    raise CubinError(f"the cubin has no section {wanted} (no such kernel)")


def _attributes(info: bytes) -> list[tuple[int, bytes]]:
    out, i = [], 0
    while i + 2 <= len(info):
        fmt, attr = info[i], info[i + 1]
        i += 2
        if fmt == 0x04:
            (n,) = struct.unpack_from("<H", info, i)
            i += 2
        else:
            n = _VALUE_BYTES.get(fmt, 0)
        out.append((attr, info[i:i + n]))
        i += n
    return out
