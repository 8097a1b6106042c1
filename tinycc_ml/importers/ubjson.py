"""A bounded reader of Universal Binary JSON (UBJSON, draft 12), the format of XGBoost's ``.ubj`` model files
(``Booster.save_model("model.ubj")``, XGBoost's default since 2.1), into the values ``json.loads`` gives.

Every length and count is checked against the bytes left before anything is allocated (a count of 2^62
elements in a 100-byte file is refused, not attempted), nesting is limited, and every problem is one
ModelFileError naming the file, the byte offset and what is wrong. Typed arrays of numbers (XGBoost's split
conditions, indices) are read with numpy in one step.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import ModelFileError

MAX_DEPTH = 64  # XGBoost's documents nest about 8 deep
# fixed-size markers -> (numpy big-endian dtype, size)
NUMBERS = {b"i": (">i1", 1), b"U": (">u1", 1), b"I": (">i2", 2), b"l": (">i4", 4), b"L": (">i8", 8),
           b"d": (">f4", 4), b"D": (">f8", 8)}
CONSTANTS = {b"Z": None, b"T": True, b"F": False}


class _Reader:
    def __init__(self, data: bytes, source: str):
        self.data, self.source, self.pos = data, source, 0

    def fail(self, problem: str):
        raise ModelFileError(f"{self.source}: not a readable UBJSON model: {problem} at byte {self.pos}")

    def take(self, n: int) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            self.fail(f"{n} bytes wanted, {len(self.data) - self.pos} left")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def marker(self) -> bytes:
        mark = self.take(1)
        while mark == b"N":  # no-op padding
            mark = self.take(1)
        return mark

    def number(self, mark: bytes):
        dtype, size = NUMBERS[mark]
        value = np.frombuffer(self.take(size), dtype=dtype)[0]
        return float(value) if mark in (b"d", b"D") else int(value)

    def length(self, what: str) -> int:
        mark = self.marker()
        if mark not in NUMBERS or mark in (b"d", b"D"):
            self.fail(f"the {what} is not an integer (marker {mark!r})")
        n = self.number(mark)
        if n < 0:
            self.fail(f"negative {what} {n}")
        return n

    def text(self) -> str:
        n = self.length("string length")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            self.fail("a string that is not UTF-8")

    def value(self, mark: bytes, depth: int):
        if mark in NUMBERS:
            return self.number(mark)
        if mark in CONSTANTS:
            return CONSTANTS[mark]
        if mark == b"C":
            return self.take(1).decode("latin-1")
        if mark in (b"S", b"H"):
            text = self.text()
            return text if mark == b"S" else self._high_precision(text)
        if mark in (b"[", b"{"):
            if depth >= MAX_DEPTH:
                self.fail(f"containers nested deeper than {MAX_DEPTH}")
            return self.container(mark == b"{", depth + 1)
        self.fail(f"unknown marker {mark!r}")

    def _high_precision(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            self.fail(f"high-precision number {text[:40]!r} is not a number")

    def container(self, is_object: bool, depth: int):
        element_type, count = None, None
        start = self.pos
        mark = self.take(1) if self.pos < len(self.data) else self.fail("a container without an end")
        if mark == b"$":
            element_type = self.take(1)
            if element_type not in NUMBERS and element_type not in CONSTANTS and element_type not in (b"C", b"S"):
                self.fail(f"typed container of {element_type!r}")
            if self.take(1) != b"#":
                self.fail("a typed container without a count")
            count = self.length("count")
        elif mark == b"#":
            count = self.length("count")
        else:
            self.pos = start
        left = len(self.data) - self.pos
        if count is not None:
            least = NUMBERS[element_type][1] if element_type in NUMBERS else (0 if element_type in CONSTANTS else 1)
            if is_object:
                least += 1  # a key's length at least
            if count * least > left or (least == 0 and count > 1 << 20):
                self.fail(f"a count of {count} elements in {left} bytes")
            if not is_object and element_type in NUMBERS:  # numbers in one read
                dtype, size = NUMBERS[element_type]
                values = np.frombuffer(self.take(count * size), dtype=dtype)
                return values.astype(np.float64 if element_type in (b"d", b"D") else np.int64).tolist()
        items = {} if is_object else []
        while True:
            if count is not None and len(items) == count:
                return items
            if count is None:
                if self.pos >= len(self.data):
                    self.fail("a container without an end")
                peek = self.data[self.pos:self.pos + 1]
                if peek == (b"}" if is_object else b"]"):
                    self.pos += 1
                    return items
            if is_object:
                key = self.text()
                items[key] = self.value(element_type or self.marker(), depth)
            else:
                items.append(self.value(element_type or self.marker(), depth))


def read_ubjson(data: bytes, source: str):
    """The value a UBJSON document holds (dicts, lists, str, int, float, bool, None)."""
    reader = _Reader(data, source)
    if not data:
        reader.fail("an empty file")
    value = reader.value(reader.marker(), 0)
    if reader.pos != len(data):
        reader.fail(f"{len(data) - reader.pos} bytes after the document")
    return value
