"""Append-only columns with amortised growth: a growing segment appends a message's rows in
one copy per column and reads them back as one contiguous array without concatenating. A
sealed segment's float vectors, once its index is in, are read from the index instead
(``IndexVectors``): held once, not twice."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import faiss
import numpy as np


class FixedColumn:
    """A numpy column (rows, or rows x dim) that doubles its capacity when full."""

    def __init__(self, dtype: np.dtype, dim: int = 0, capacity: int = 1024) -> None:
        shape = (capacity, dim) if dim else (capacity,)
        self._data = np.empty(shape, dtype=dtype)
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def checked(self, values: Any, rows: int) -> np.ndarray:
        """``values`` as this column stores them, or ValueError: a message is checked whole
        before any column takes its rows, so a bad one changes nothing."""
        try:
            array = np.asarray(values, dtype=self._data.dtype)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"values not convertible to {self._data.dtype}: {exc}") from None
        if array.shape != (rows, *self._data.shape[1:]):
            raise ValueError(f"shape {array.shape}, expected {(rows, *self._data.shape[1:])}")
        return array

    def append(self, values: np.ndarray) -> None:
        n = len(values)
        if self._len + n > len(self._data):
            capacity = max(len(self._data) * 2, self._len + n)
            grown = np.empty((capacity, *self._data.shape[1:]), dtype=self._data.dtype)
            grown[: self._len] = self._data[: self._len]
            self._data = grown
        self._data[self._len : self._len + n] = values
        self._len += n

    def view(self) -> np.ndarray:
        """The filled part. Valid until the next append (which may move the buffer)."""
        return self._data[: self._len]

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` (offsets), a copy: what every vector column answers."""
        return self._data[: self._len][rows]

    @property
    def nbytes(self) -> int:
        """Bytes allocated (the filled part and the room grown ahead)."""
        return self._data.nbytes

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` values in all, allocated once (a sealed segment knows its size:
        no doubling, no copies, no spare room)."""
        if rows > len(self._data):
            grown = np.empty((rows, *self._data.shape[1:]), dtype=self._data.dtype)
            grown[: self._len] = self._data[: self._len]
            self._data = grown

    def drop_head(self, rows: int) -> None:
        """Forget the first ``rows`` values, and their memory."""
        self._data = self._data[rows : self._len].copy()
        self._len -= rows


class NullableVectors:
    """A nullable vector field's column: only the rows holding a vector keep one, each row
    its place among them (-1: null), as Milvus stores nullable vectors. A vector field added
    to a collection of a million rows costs 8 bytes a row until rows give it vectors, not
    its width (512 bytes at 128 float dimensions)."""

    def __init__(self, dtype: np.dtype, width: int) -> None:
        # room for a few vectors to start with: a sealed segment of rows from before the
        # field was added holds none, and 1,024 of them would be 512 KB at 128 dimensions
        self._vectors = FixedColumn(dtype, width, capacity=16)
        self._slots = FixedColumn(np.dtype("<i8"))

    def __len__(self) -> int:
        return len(self._slots)

    def checked(self, values: Any, rows: int) -> np.ndarray:
        """Every row's vector (a null's is a placeholder), as FixedColumn checks them."""
        return self._vectors.checked(values, rows)

    def append(self, values: np.ndarray, valid: np.ndarray | None = None) -> None:
        """Rows ``values``; those where ``valid`` is False (None: none) keep no vector."""
        held = np.ones(len(values), bool) if valid is None else valid
        slots = np.full(len(values), -1, np.int64)
        slots[held] = np.arange(len(self._vectors), len(self._vectors) + int(held.sum()))
        self._vectors.append(values[held])
        self._slots.append(slots)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows``' vectors, zeros for a null (what results carry beside validity)."""
        slots = self._slots.view()[rows]
        out = np.zeros((len(slots), *self._vectors.view().shape[1:]), self._vectors.view().dtype)
        held = slots >= 0
        out[held] = self._vectors.view()[slots[held]]
        return out

    def held(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of rows ``start:end`` that hold one, and their offsets from ``start``."""
        slots = self._slots.view()[start:end]
        offsets = np.flatnonzero(slots >= 0)
        return self._vectors.view()[slots[offsets]], offsets

    def view(self) -> np.ndarray:
        """Every row's vector, zeros for nulls: a full copy (the stores read rows by
        ``take``; this serves what reads whole columns)."""
        return self.take(np.arange(len(self)))

    @property
    def nbytes(self) -> int:
        return self._vectors.nbytes + self._slots.nbytes

    def drop_head(self, rows: int) -> None:
        kept = int(np.count_nonzero(self._slots.view()[:rows] >= 0))
        self._vectors.drop_head(kept)
        self._slots.drop_head(rows)
        slots = self._slots.view()
        slots[slots >= 0] -= kept


class ObjectColumn:
    """VarChar values, or texts read as something else (JSON documents, geometries): kept as
    text, ``parse``d once per row on first read, so a read parses only the rows added
    since the last one."""

    def __init__(
        self,
        parse: Callable[[list[str]], list[Any]] | None = None,
        parsed_bytes: Callable[[Any], int] = sys.getsizeof,
    ) -> None:
        self._values: list[Any] = []
        self._parse = parse
        #: what one parsed row holds in memory (a JSON document's every object, a
        #: geometry's GEOS coordinates): read ones outweigh their text many times
        self._parsed_bytes = parsed_bytes
        self._parsed_upto = 0
        self._parsed: list[Any] = []

    def __len__(self) -> int:
        return len(self._values)

    def checked(self, values: Any, rows: int) -> list[Any]:
        """``values`` as a list of ``rows`` strings, or ValueError (see FixedColumn)."""
        out = list(values) if not isinstance(values, str | bytes) else [values]
        if len(out) != rows:
            raise ValueError(f"{len(out)} values, expected {rows}")
        if not all(isinstance(v, str) for v in out):
            raise ValueError("text values expected")
        return out

    def append(self, values: list[str]) -> None:
        self._values.extend(values)

    def view(self) -> list[Any]:
        if self._parse is None:
            return self._values
        if self._parsed_upto < len(self._values):
            self._parsed.extend(self._parse(self._values[self._parsed_upto :]))
            self._parsed_upto = len(self._values)
        return self._parsed

    def raw(self) -> list[str]:
        return self._values

    @property
    def nbytes(self) -> int:
        """An estimate: the lists' slots and their values' sizes, from a sample of each."""
        return _list_bytes(self._values, sys.getsizeof) + _list_bytes(
            self._parsed, self._parsed_bytes
        )

    def drop_head(self, rows: int) -> None:
        self._values = self._values[rows:]
        parsed = min(rows, self._parsed_upto)
        self._parsed = self._parsed[parsed:]
        self._parsed_upto -= parsed


def _list_bytes(values: list[Any], size: Callable[[Any], int]) -> int:
    n = len(values)
    if not n:
        return 0
    sample = values[:: max(1, n // 256)]
    return int(n * (8 + sum(map(size, sample)) / len(sample)))


def json_bytes(document: Any) -> int:
    """A parsed JSON document's memory: every dict, list, key and value in it (None,
    booleans and small integers are shared objects: free)."""
    if isinstance(document, dict):
        inner = sum(json_bytes(k) + json_bytes(v) for k, v in document.items())
        return sys.getsizeof(document) + inner
    if isinstance(document, list):
        return sys.getsizeof(document) + sum(map(json_bytes, document))
    if document is None or isinstance(document, bool):
        return 0
    if isinstance(document, int) and -5 <= document <= 256:
        return 0
    return sys.getsizeof(document)


def json_documents(texts: list[str]) -> list[Any]:
    """JSON texts as documents; a null row's placeholder ("") and bad text read as None."""
    return [_loads(text) for text in texts]


def _loads(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


class IndexVectors:
    """A sealed segment's float32 vectors as its faiss index keeps them: the segment holds
    its vectors once, in the index, instead of a column beside a copy inside the index.

    HNSW (flat storage): ``view()`` is a numpy view of the index's own buffer, no copy.
    IVF_FLAT: rows are kept per inverted list, so rows are reconstructed on demand through
    the index's direct map (8 bytes a row); ``view()`` then builds a full copy (only exact
    searches with another metric need that). The column takes no more rows."""

    def __init__(self, index: faiss.Index) -> None:
        self._index = faiss.downcast_index(index)  # also keeps a view's buffer alive
        self._len = self._index.ntotal
        self._flat: np.ndarray | None = None
        if isinstance(self._index, faiss.IndexHNSW):
            storage = faiss.downcast_index(self._index.storage)
            data = faiss.rev_swig_ptr(storage.get_xb(), self._len * self._index.d)
            self._flat = data.reshape(self._len, self._index.d)
        else:
            self._index.make_direct_map()

    @staticmethod
    def holds_rows(index: faiss.Index) -> bool:
        """Whether this index kind keeps every row's float32 vector exactly (no coding)."""
        index = faiss.downcast_index(index)
        if isinstance(index, faiss.IndexHNSW):
            return isinstance(faiss.downcast_index(index.storage), faiss.IndexFlat)
        return isinstance(index, faiss.IndexIVFFlat)

    def __len__(self) -> int:
        return self._len

    @property
    def nbytes(self) -> int:
        return 0  # counted with the index

    def view(self) -> np.ndarray:
        if self._flat is not None:
            return self._flat
        return self._index.reconstruct_n(0, self._len)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` (offsets), as a numpy array."""
        rows = np.asarray(rows, dtype=np.int64)
        if self._flat is not None:
            return self._flat[rows]
        if not len(rows):
            return np.empty((0, self._index.d), np.float32)
        return self._index.reconstruct_batch(rows)

    def checked(self, values: Any, rows: int) -> np.ndarray:
        raise ValueError("a sealed segment's vectors take no more rows")

    def append(self, values: np.ndarray) -> None:
        raise ValueError("a sealed segment's vectors take no more rows")

    def drop_head(self, rows: int) -> None:
        raise ValueError("a sealed segment's rows are not dropped")
