"""FlexBuffers maps: the options of TFLite's custom operators (``custom_options``), read strictly.

Only what custom operators' options hold is read: a root map whose keys are strings and whose values are
integers, unsigned integers, booleans, floats (inline or indirect) or null. Every offset, width and length is
checked against the buffer before it is followed; anything else (a vector, a blob, a nested map, bytes that do
not parse) raises ``FlexBufferError`` naming what was wrong, which the reader reports with the file and the
operator. Format: https://google.github.io/flatbuffers/flatbuffers_internals.html (FlexBuffers).
"""

from __future__ import annotations

import struct

# the value types (the upper six bits of a packed type byte) this reader knows
NULL, INT, UINT, FLOAT, KEY, INDIRECT_INT, INDIRECT_UINT, INDIRECT_FLOAT, MAP, BOOL = 0, 1, 2, 3, 4, 6, 7, 8, 9, 26
MAX_KEYS = 256


class FlexBufferError(ValueError):
    """Bytes that are not a FlexBuffer map of scalars (the message says where)."""


class _Reader:
    def __init__(self, data: bytes):
        self.data = data

    def need(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise FlexBufferError(f"{what} at byte {offset} (+{size}) lies outside the {len(self.data)} bytes")

    def uint(self, offset: int, width: int, what: str) -> int:
        self.need(offset, width, what)
        return int.from_bytes(self.data[offset:offset + width], "little", signed=False)

    def int(self, offset: int, width: int, what: str) -> int:
        self.need(offset, width, what)
        return int.from_bytes(self.data[offset:offset + width], "little", signed=True)

    def float(self, offset: int, width: int, what: str) -> float:
        if width not in (4, 8):
            raise FlexBufferError(f"{what}: a float of {width} bytes")
        self.need(offset, width, what)
        return struct.unpack_from("<f" if width == 4 else "<d", self.data, offset)[0]

    def target(self, offset: int, width: int, what: str) -> int:
        """Where the offset stored at ``offset`` points (offsets count back from where they are stored)."""
        at = offset - self.uint(offset, width, what)
        if at < 0 or at >= len(self.data):
            raise FlexBufferError(f"{what}: an offset pointing outside the buffer")
        return at

    def key(self, offset: int, what: str) -> str:
        end = self.data.find(b"\0", offset)
        if end < 0:
            raise FlexBufferError(f"{what}: a key without its terminating zero")
        try:
            return self.data[offset:end].decode("utf-8")
        except UnicodeDecodeError:
            raise FlexBufferError(f"{what}: a key that is not UTF-8") from None

    def scalar(self, offset: int, parent_width: int, packed: int, what: str):
        kind, width = packed >> 2, 1 << (packed & 3)
        if kind == NULL:
            return None
        if kind == INT:
            return self.int(offset, parent_width, what)
        if kind in (UINT, BOOL):
            value = self.uint(offset, parent_width, what)
            return bool(value) if kind == BOOL else value
        if kind == FLOAT:
            return self.float(offset, parent_width, what)
        if kind in (INDIRECT_INT, INDIRECT_UINT, INDIRECT_FLOAT):
            at = self.target(offset, parent_width, what)
            return (self.int if kind == INDIRECT_INT else self.uint if kind == INDIRECT_UINT else self.float)(
                at, width, what)
        raise FlexBufferError(f"{what}: a value of FlexBuffer type {kind}; options hold numbers and booleans only")


def read_map(data: bytes) -> dict[str, int | float | bool | None]:
    """The root map of FlexBuffer bytes as a dict (empty bytes: an empty map)."""
    if not data:
        return {}
    r = _Reader(bytes(data))
    if len(r.data) < 3:
        raise FlexBufferError(f"{len(r.data)} bytes are too few for a FlexBuffer")
    root_width, packed = r.data[-1], r.data[-2]
    if root_width not in (1, 2, 4, 8):
        raise FlexBufferError(f"root width {root_width} is not 1, 2, 4 or 8 bytes")
    if packed >> 2 != MAP:
        raise FlexBufferError(f"the root is of FlexBuffer type {packed >> 2}, not a map")
    width = 1 << (packed & 3)
    data_at = r.target(len(r.data) - 2 - root_width, root_width, "the root map")
    size = r.uint(data_at - width, width, "the map's size")
    if size > MAX_KEYS:
        raise FlexBufferError(f"a map of {size} entries (at most {MAX_KEYS})")
    keys_at = r.target(data_at - 3 * width, width, "the map's keys")
    keys_width = r.uint(data_at - 2 * width, width, "the keys' width")
    if keys_width not in (1, 2, 4, 8) or r.uint(keys_at - keys_width, keys_width, "the keys' count") != size:
        raise FlexBufferError("the map's keys do not match its values")
    r.need(data_at, size * width + size, "the map's values")
    result: dict = {}
    for i in range(size):
        name = r.key(r.target(keys_at + i * keys_width, keys_width, f"key {i}"), f"key {i}")
        if name in result:
            raise FlexBufferError(f"key {name!r} appears twice")
        result[name] = r.scalar(data_at + i * width, width, r.data[data_at + size * width + i], f"value {name!r}")
    return result
