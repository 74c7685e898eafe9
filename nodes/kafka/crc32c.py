"""CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) in pure Python.

Record batch v2 checksums use this CRC. Two strategies, chosen by input size:

* small inputs (the common record batch) run a slicing-by-8 table loop;
* large inputs run a vectorised tree over the bytes: the CRC register is linear over GF(2), so
  the contribution of each 4-byte word is a linear map of the word that depends only on how many
  words follow it. Words are split into byte "planes" with strided slices, mapped through
  `bytes.translate` tables (one per lane, output byte and distance) and XOR-combined as big ints,
  a block of words at a time, then block values are folded the same way until one word is left.
  Every step runs in C inside CPython, roughly 20x faster than the table loop.

`crc32c(data, value)` has the calling convention of `zlib.crc32`: pass the previous result as
`value` to continue a running checksum.
"""

from __future__ import annotations

import struct

__all__ = ["crc32c", "crc32c_combine"]

_POLY = 0x82F63B78
_MASK = 0xFFFFFFFF

# Inputs of at least this many bytes take the vectorised path (measured crossover on CPython 3.11).
_VECTOR_MIN = 1024
# Large inputs are processed in chunks of this size: big ints stay cache-friendly.
_CHUNK = 1 << 16
_LEVEL0_BLOCK = 8  # words folded per block on the first level (4 below _SMALL bytes)
_SMALL = 8192
_LEVEL_BLOCK = 4  # blocks folded per group on later levels


def _byte_tables() -> list[list[int]]:
    t0 = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(v >> 8) ^ t0[v & 0xFF] for v in prev])
    return tables


# _T[k][b]: register after byte b is followed by k zero bytes (zero register before b).
_T = _byte_tables()
_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _T
_U32X2 = struct.Struct("<II")


def _loop(crc: int, data: bytes | bytearray | memoryview) -> int:
    """Slicing-by-8 over `data` with register `crc` (pre-inverted); returns the register."""
    n = len(data)
    n8 = n & ~7
    t0, t1, t2, t3, t4, t5, t6, t7 = _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7
    if n8:
        for a, b in _U32X2.iter_unpack(data[:n8] if n8 != n else data):
            a ^= crc
            crc = (
                t7[a & 0xFF]
                ^ t6[(a >> 8) & 0xFF]
                ^ t5[(a >> 16) & 0xFF]
                ^ t4[a >> 24]
                ^ t3[b & 0xFF]
                ^ t2[(b >> 8) & 0xFF]
                ^ t1[(b >> 16) & 0xFF]
                ^ t0[b >> 24]
            )
    for b in data[n8:]:
        crc = t0[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


# --- linear maps on the 32-bit register -----------------------------------------------------------
# A map is the list of the images of the 32 basis vectors. F = "shift four zero bytes through".


def _apply(m: list[int], v: int) -> int:
    r = 0
    b = 0
    while v:
        if v & 1:
            r ^= m[b]
        v >>= 1
        b += 1
    return r


def _compose(a: list[int], b: list[int]) -> list[int]:
    """The map `a` after `b`."""
    return [_apply(a, x) for x in b]


_IDENTITY = [1 << b for b in range(32)]
_F = [_T3[v & 0xFF] ^ _T2[(v >> 8) & 0xFF] ^ _T1[(v >> 16) & 0xFF] ^ _T0[v >> 24] for v in _IDENTITY]
_F_POW2 = [_F]  # _F_POW2[k] = F^(2^k)
_TRANSLATE: dict[int, list[list[bytes]]] = {}


def _f_power(e: int) -> list[int]:
    """F^e: the register after 4*e zero bytes, as a linear map."""
    result = _IDENTITY
    k = 0
    while e:
        while len(_F_POW2) <= k:
            last = _F_POW2[-1]
            _F_POW2.append(_compose(last, last))
        if e & 1:
            result = _compose(_F_POW2[k], result)
        e >>= 1
        k += 1
    return result


def _translate_tables(e: int) -> list[list[bytes]]:
    """tables[l][j] maps byte x in lane l (bits 8l..8l+7 of a word) to byte j of F^e(x << 8l)."""
    tables = _TRANSLATE.get(e)
    if tables is None:
        m = _f_power(e)
        tables = []
        for lane in range(4):
            images = m[8 * lane : 8 * lane + 8]
            vals = [0] * 256
            for x in range(1, 256):
                low = x & -x
                vals[x] = vals[x ^ low] ^ images[low.bit_length() - 1]
            tables.append([bytes((v >> (8 * j)) & 0xFF for v in vals) for j in range(4)])
        _TRANSLATE[e] = tables
    return tables


def _fold(planes: list[bytes], count: int, span: int, block: int, extra: int) -> tuple[list[bytes], int]:
    """Fold `count` values (given as 4 byte planes, little-endian byte j of each value in plane j),
    each standing for `span` words, into ceil(count / block) values of `span * block` words.
    `extra` extra F steps are applied to every value (1 on the first level: raw words)."""
    pad = -count % block
    if pad:  # leading zero words do not change a zero-initialised CRC
        zeros = bytes(pad)
        planes = [zeros + p for p in planes]
        count += pad
    from_bytes = int.from_bytes
    acc0 = acc1 = acc2 = acc3 = 0
    for i in range(block):
        e = span * (block - 1 - i) + extra
        if e == 0:
            acc0 ^= from_bytes(planes[0][i::block], "little")
            acc1 ^= from_bytes(planes[1][i::block], "little")
            acc2 ^= from_bytes(planes[2][i::block], "little")
            acc3 ^= from_bytes(planes[3][i::block], "little")
            continue
        for lane, (m0, m1, m2, m3) in enumerate(_translate_tables(e)):
            s = planes[lane][i::block]
            acc0 ^= from_bytes(s.translate(m0), "little")
            acc1 ^= from_bytes(s.translate(m1), "little")
            acc2 ^= from_bytes(s.translate(m2), "little")
            acc3 ^= from_bytes(s.translate(m3), "little")
    n = count // block
    return [
        acc0.to_bytes(n, "little"),
        acc1.to_bytes(n, "little"),
        acc2.to_bytes(n, "little"),
        acc3.to_bytes(n, "little"),
    ], n


def _vector(crc: int, data: bytes) -> int:
    """Register after `data` (length a multiple of 4, at least 4) starting from register `crc`."""
    words = len(data) // 4
    # A register value is equivalent to XOR-ing it into the first four bytes of a zero-register run.
    head = (int.from_bytes(data[:4], "little") ^ crc).to_bytes(4, "little")
    planes = [head[j : j + 1] + data[4 + j :: 4] for j in range(4)]
    block = 4 if len(data) < _SMALL else _LEVEL0_BLOCK
    planes, words = _fold(planes, words, 1, block, 1)
    span = block
    while words > 1:
        planes, words = _fold(planes, words, span, _LEVEL_BLOCK, 0)
        span *= _LEVEL_BLOCK
    return planes[0][0] | planes[1][0] << 8 | planes[2][0] << 16 | planes[3][0] << 24


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of `data`, continuing from a previous result `value` (0 to start)."""
    crc = (value & _MASK) ^ _MASK
    if isinstance(data, memoryview) and (data.itemsize != 1 or data.ndim != 1):
        data = data.cast("B")
    n = len(data)
    if n < _VECTOR_MIN:
        return _loop(crc, data) ^ _MASK
    mv = memoryview(data)
    pos = 0
    n4 = n & ~3
    while n4 - pos >= _VECTOR_MIN:
        end = min(pos + _CHUNK, n4)
        crc = _vector(crc, mv[pos:end].tobytes())
        pos = end
    return _loop(crc, mv[pos:]) ^ _MASK


def crc32c_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32C of A + B from crc1 = crc32c(A), crc2 = crc32c(B) and len2 = len(B)."""
    # crc(A+B) = L(crc1) ^ crc2, L = the register pushed through len2 zero bytes (the inversions cancel).
    if len2 < 0:
        raise ValueError("len2 must be >= 0")
    words, rest = divmod(len2, 4)
    reg = crc1 & _MASK
    reg = _apply(_f_power(words), reg) if words else reg
    for _ in range(rest):
        reg = _T0[reg & 0xFF] ^ (reg >> 8)
    return reg ^ (crc2 & _MASK)
