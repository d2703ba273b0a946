"""In-memory cosine index over unit float32 rows (spec "Signal 3").

    cos(q, d) = (q / |q|) . (d / |d|)     (0 when a norm is 0, as upstream)

All rows live in one contiguous ``(capacity, dim)`` float32 matrix, so a query is one
matrix-vector product (block-wise over a memory map, see :func:`mapped_scores`); top-k uses ``argpartition`` and then sorts only the candidates,
ties broken by id ascending. Capacity doubles when full (amortised O(1) append); removed
rows are marked dead and compacted away before the next query.

A start takes its rows from the vector sidecar with :meth:`VectorIndex.load_unit_rows`:
the memory-mapped, already normalised matrix becomes the index's matrix as it is (no copy,
no per-id Python work) and is copied only when a write first needs room or a writable row
(copy-on-grow). The map stays valid when the sidecar is replaced: a new generation is
written under new file names and the old files are unlinked, never truncated or rewritten,
and an unlinked file stays mapped on POSIX systems (its disk space is freed with the last
map). The map is read-only, so nothing here can write into the sidecar; a ``.npy`` cut short
by hand under a running process would fault on its next read, as any mapped file would.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

DEFAULT_NAMESPACE = "default"
CHUNK_ROWS = 4096  # rows checked and normalised at a time: temporaries stay small at any size


class DimensionError(ValueError):
    """Vectors whose width differs from the index's (upstream RecallDimensionError)."""


def _checked_rows(vectors: NDArray, dim: int) -> NDArray[np.float32]:
    """``vectors`` as (n, dim) float32 (no copy when they already are), finite."""
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != dim:
        raise DimensionError(f"Embedding dimension mismatch for store: expected (n, {dim}), got {x.shape}")
    for a in range(0, x.shape[0], CHUNK_ROWS):
        if not np.isfinite(x[a:a + CHUNK_ROWS]).all():
            raise ValueError("vectors contain NaN or infinite values")
    return x


def _normalise(rows: NDArray[np.float32]) -> None:
    """Divide each row by its norm in place (a zero row stays zero): the same float32
    operations as ``x / norms`` row by row, without a second matrix (``linalg.norm``
    squares its input into a temporary, so it runs on CHUNK_ROWS rows at a time)."""
    for a in range(0, rows.shape[0], CHUNK_ROWS):
        block = rows[a:a + CHUNK_ROWS]
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        block /= norms


def unit_rows(vectors: NDArray, dim: int) -> NDArray[np.float32]:
    """A normalised copy of ``vectors``: the rows an upsert of them stores, bit for bit
    (the vector sidecar keeps them, so a start adopts them without normalising again)."""
    x = _checked_rows(vectors, dim).copy()
    _normalise(x)
    return x


SCAN_ROWS = 4096
"""Rows of a memory-mapped matrix multiplied at a time (6 MiB at 384 floats): the map's pages
are dropped after each block, so a scan holds one block, not the whole matrix, resident."""


def _mapping(rows: NDArray) -> mmap.mmap | None:
    """The memory map behind ``rows`` (a sidecar's ``np.load(mmap_mode="r")``), if any."""
    base = rows
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base


def release_pages(rows: NDArray) -> None:
    """Drop the pages of the memory map behind ``rows`` from this process (a no-op for
    an array in ordinary memory). The map is read-only and file-backed, so the next read
    faults them back in from the page cache: only the resident set changes, not a value.
    Why: a recall reads the whole (n, dim) sidecar matrix twice (the unit check at load,
    the product at query time), and a touched page of a map stays in the process's RSS
    until it is unmapped (issue 38: 150 MB at 100,000 memories of 384 floats)."""
    base = _mapping(rows)
    if base is not None and hasattr(mmap, "MADV_DONTNEED"):
        try:
            base.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):  # a closed map or a platform without it: only memory is at stake
            pass


UNIT_TOLERANCE = 1e-4
"""How far from 1 a stored unit row's norm may be (float32 rounding is ~1e-7): rows handed
to :meth:`VectorIndex.load_unit_rows` are checked, unless the caller has just checked
them against a sidecar's digest (which refuses a flipped bit)."""


def _plausible_unit_rows(rows: NDArray[np.float32]) -> bool:
    """Every row of unit length (or zero, as a zero vector stays), hence finite too; a
    mapped matrix's pages are dropped as the check goes (:func:`release_pages`)."""
    mapped = _mapping(rows) is not None
    for a in range(0, rows.shape[0], CHUNK_ROWS):
        norms = np.linalg.norm(rows[a:a + CHUNK_ROWS], axis=1)
        if mapped and a % SCAN_ROWS == SCAN_ROWS - CHUNK_ROWS:
            release_pages(rows)
        if not ((np.abs(norms - 1.0) <= UNIT_TOLERANCE) | (norms == 0)).all():  # NaN fails both
            return False
    return True


def mapped_scores(rows: NDArray[np.float32], q: NDArray[np.float32]) -> NDArray[np.float32]:
    """``rows @ q`` for a read-only memory-mapped matrix, SCAN_ROWS rows at a time, the
    map's pages dropped after each block (issue 38: the peak RSS of a process's recall).

    With at most SCAN_ROWS rows it is the one product, bit for bit. Above, each block is
    its own BLAS call, and BLAS's result for a row depends on where the call's blocks and
    thread ranges fall (as the whole product's does on the thread count): a score may
    differ from the whole product's in the last bits (~1e-7 relative), never more; the
    test compares rankings with the in-memory index's."""
    n = rows.shape[0]
    if n <= SCAN_ROWS:
        out = rows @ q
        release_pages(rows)
        return out
    out = np.empty(n, dtype=np.result_type(rows.dtype, q.dtype))
    for a in range(0, n, SCAN_ROWS):
        np.matmul(rows[a:a + SCAN_ROWS], q, out=out[a:a + SCAN_ROWS])
        release_pages(rows)
    return out


class VectorIndex:
    """Ids map to rows; each row has a namespace (default ``"default"``). Ids are unique
    across namespaces; upserting an existing id replaces its vector and namespace."""

    def __init__(self, dim: int, capacity: int = 64) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self._mat = np.zeros((max(1, capacity), dim), dtype=np.float32)
        self._ids: list[str | None] = []  # row -> id (None when dead)
        self._ns = np.zeros(max(1, capacity), dtype=np.int32)  # row -> namespace code
        self._ns_codes: dict[str, int] = {}
        self._row: dict[str, int] = {}
        self._dead = 0

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, item: object) -> bool:
        return item in self._row

    @property
    def ids(self) -> list[str]:
        return [i for i in self._ids if i is not None]

    def vector(self, id: str) -> NDArray[np.float32]:
        """A copy of the stored (unit) row for ``id``."""
        return self._mat[self._row[id]].copy()

    def vectors_of(self, ids: Sequence[str]) -> NDArray[np.float32]:
        """The stored (unit) rows of ``ids``, stacked, read-only; KeyError for an absent id.
        When ``ids`` are rows ``0 .. n-1`` in order (a freshly loaded index) this is a view,
        not a copy: a rehydration hands the rows on without holding them twice."""
        rows = self._present_rows(ids)
        if rows.size and rows[0] == 0 and rows[-1] == rows.size - 1 and (np.diff(rows) == 1).all():
            out = self._mat[:rows.size]
        else:
            out = self._mat[rows]
        out = out.view()
        out.flags.writeable = False
        return out

    def _present_rows(self, ids: Sequence[str]) -> NDArray[np.int64]:
        """:meth:`rows_of`, with a KeyError for the first absent id."""
        rows = self.rows_of(ids)
        if (rows < 0).any():
            raise KeyError(ids[int(np.flatnonzero(rows < 0)[0])])
        return rows

    def load_unit_rows(self, ids: list[str], rows: NDArray[np.float32], ns_codes: NDArray[np.integer],
                       ns_names: Sequence[str], *, digest_checked: bool = False) -> None:
        """Fill an empty index with rows that are already unit length (a sidecar's, made by
        :func:`unit_rows`), taken as they are: a read-only memory map stays one, copied on
        the first write (see the module doc). Row ``r`` is ``ids[r]`` in namespace
        ``ns_names[ns_codes[r]]``; the index owns ``rows`` from now on. ValueError, nothing
        stored, when the index holds rows, the shapes, codes or ids do not fit (distinct
        non-empty strings), or a row is not of unit length. ``digest_checked``: the rows are
        a sidecar's whose digest was just checked against what :func:`unit_rows` wrote, so
        the pass over every row that checks their length is skipped (it would read the
        whole matrix once more at every start)."""
        if self._row:
            raise ValueError("load_unit_rows needs an empty index")
        n = len(ids)
        row = dict(zip(ids, range(n)))
        codes = np.asarray(ns_codes)
        if rows.dtype != np.float32 or rows.shape != (n, self.dim) or codes.shape != (n,):
            raise ValueError(f"{n} ids but rows of shape {rows.shape} and {codes.shape} namespace codes")
        if len(row) != n or "" in row:
            raise ValueError("ids must be distinct non-empty strings")
        if n and (int(codes.min()) < 0 or int(codes.max()) >= len(ns_names)):
            raise ValueError("a namespace code out of range")
        if not digest_checked:
            plausible = _plausible_unit_rows(rows)
            release_pages(rows)  # the pages of the check's last blocks
            if not plausible:
                raise ValueError("rows are not of unit length (or not finite)")
        if not n:
            return
        known: dict[str, int] = {}
        remap = np.fromiter((known.setdefault(ns, len(known)) for ns in ns_names), dtype=np.int32, count=len(ns_names))
        self._mat = rows
        self._ns = remap[codes]
        self._ns_codes = known
        self._ids = list(ids)
        self._row = row
        self._dead = 0

    def in_order(self, ids: Sequence[str]) -> VectorIndex:
        """This index when its rows are exactly ``ids`` in that order (a loaded one), else a
        new index holding their rows in that order, copied as they are (already unit, never
        normalised twice); KeyError for an absent id."""
        ids = list(ids)
        if not self._dead and self._ids == ids:
            return self
        rows = self._present_rows(ids)
        out = VectorIndex(self.dim)
        names = sorted(self._ns_codes, key=self._ns_codes.__getitem__)
        out.load_unit_rows(ids, self._mat[rows], self._ns[rows], names)  # gathers: copies
        return out

    def namespace_of(self, id: str) -> str:
        code = int(self._ns[self._row[id]])
        return next(ns for ns, c in self._ns_codes.items() if c == code)

    def _code(self, namespace: str) -> int:
        return self._ns_codes.setdefault(namespace, len(self._ns_codes))

    def _grow(self, need: int) -> None:
        """Room for ``need`` rows in a matrix this index may write: capacity doubles when
        full, and a loaded (read-only) matrix is copied here, on the first write."""
        cap = self._mat.shape[0]
        if need <= cap and self._mat.flags.writeable:
            return
        cap = max(cap, 1)
        if not self._ids:
            cap = max(cap, need)  # a first bulk load gets exactly its rows: no doubled slack (index RSS, issue 18)
        while cap < need:
            cap *= 2
        mat = np.zeros((cap, self.dim), dtype=np.float32)
        mat[: len(self._ids)] = self._mat[: len(self._ids)]
        ns = np.zeros(cap, dtype=np.int32)
        ns[: len(self._ids)] = self._ns[: len(self._ids)]
        self._mat, self._ns = mat, ns

    def upsert(self, ids: Sequence[str], vectors: NDArray, namespaces: Sequence[str] | str | None = None) -> None:
        """Insert or replace rows; vectors are normalised to unit length on the way in."""
        ids = list(ids)
        rows = _checked_rows(vectors, self.dim)  # normalised where they land: no copy of the block
        if rows.shape[0] != len(ids):
            raise ValueError(f"{len(ids)} ids but {rows.shape[0]} vectors")
        if namespaces is None or isinstance(namespaces, str):
            nss = [namespaces or DEFAULT_NAMESPACE] * len(ids)
        else:
            nss = list(namespaces)
            if len(nss) != len(ids):
                raise ValueError(f"{len(ids)} ids but {len(nss)} namespaces")
        if not ids:
            return
        new = sum(1 for i in dict.fromkeys(ids) if i not in self._row)
        self._grow(len(self._ids) + new)
        if new == len(ids) and all(isinstance(i, str) and i for i in ids):  # all new, distinct: one block
            start = len(self._ids)
            self._ids.extend(ids)
            self._row.update(zip(ids, range(start, start + new)))
            self._mat[start:start + new] = rows
            _normalise(self._mat[start:start + new])
            self._ns[start:start + new] = np.fromiter((self._code(ns) for ns in nss), dtype=np.int32, count=new)
            return
        rows = unit_rows(rows, self.dim)
        for id_, row, ns in zip(ids, rows, nss, strict=True):
            if not isinstance(id_, str) or not id_:
                raise ValueError(f"ids must be non-empty strings, got {id_!r}")
            r = self._row.get(id_)
            if r is None:
                r = len(self._ids)
                self._ids.append(id_)
                self._row[id_] = r
            self._mat[r] = row
            self._ns[r] = self._code(ns)

    def remove(self, ids: Iterable[str]) -> int:
        """Drop ids (unknown ids are ignored); returns how many were removed."""
        n = 0
        for id_ in ids:
            r = self._row.pop(id_, None)
            if r is not None:
                self._ids[r] = None
                self._dead += 1
                n += 1
        return n

    def rows_of(self, ids: Sequence[str]) -> NDArray[np.int64]:
        """Row of each id in :meth:`row_scores` order (-1 when absent). Valid until the next
        upsert or removal."""
        if self._dead:
            self._compact()
        row, n, m = self._row, len(ids), len(self._ids)
        head = n - m
        # a start's layout: ids end with the loaded order (graph documents, which hold no
        # vector, before every memory), so the tail is rows 0 .. m-1 with no lookup per id
        if (isinstance(ids, (list, tuple)) and head >= 0 and m and list(ids[head:]) == self._ids
                and not any(i in row for i in ids[:head])):
            out = np.full(n, -1, dtype=np.int64)
            out[head:] = np.arange(m, dtype=np.int64)
            return out
        return np.fromiter((row.get(i, -1) for i in ids), dtype=np.int64, count=n)

    def row_scores(self, query_vec: NDArray) -> NDArray[np.float32]:
        """Cosine of the query with every live row, in row order (see :meth:`rows_of`)."""
        return self._all_scores(query_vec, None)[0]

    def _compact(self) -> None:
        alive = np.fromiter((i is not None for i in self._ids), dtype=bool, count=len(self._ids))
        keep = np.flatnonzero(alive)
        n = len(keep)
        self._grow(len(self._ids))  # a loaded matrix is copied before it is written
        self._mat[:n] = self._mat[keep]
        self._ns[:n] = self._ns[keep]
        self._ids = [self._ids[r] for r in keep]
        self._row = {id_: r for r, id_ in enumerate(self._ids)}
        self._dead = 0

    def _query(self, query_vec: NDArray) -> NDArray[np.float32]:
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise DimensionError("Cannot compare embeddings with different dimensions.")
        norm = float(np.linalg.norm(q))
        return q / norm if norm > 0 else q

    def _all_scores(self, query_vec: NDArray, namespace: str | None) -> tuple[NDArray[np.float32], NDArray[np.intp] | None]:
        """Cosines of every live row, and the rows in ``namespace`` (None = all rows)."""
        if self._dead:
            self._compact()
        q = self._query(query_vec)
        mat = self._mat[: len(self._ids)]
        scores = mapped_scores(mat, q) if _mapping(mat) is not None else mat @ q
        if namespace is None:
            return scores, None
        code = self._ns_codes.get(namespace)
        if code is None:
            return scores, np.zeros(0, dtype=np.intp)
        if len(self._ns_codes) == 1:
            return scores, None
        return scores, np.flatnonzero(self._ns[: len(self._ids)] == code)

    def search(self, query_vec: NDArray, k: int, namespace: str | None = None) -> list[tuple[str, float]]:
        """Top ``k`` (id, cosine): score descending, ties by id ascending."""
        if k <= 0 or not self._row:
            return []
        scores, rows = self._all_scores(query_vec, namespace)
        pool = scores if rows is None else scores[rows]
        if pool.size == 0:
            return []
        if k < pool.size:
            # every row scoring at least the k-th best is a candidate, so ties at the
            # boundary are all kept and the id tie-break below is exact
            kth = np.partition(pool, pool.size - k)[pool.size - k]
            cand = np.flatnonzero(pool >= kth)
        else:
            cand = np.arange(pool.size)
        ids = self._ids
        rowmap = cand if rows is None else rows[cand]
        order = sorted(zip(pool[cand].tolist(), rowmap.tolist()), key=lambda sr: (-sr[0], ids[sr[1]]))
        return [(ids[r], s) for s, r in order[:k]]

    def scores(self, query_vec: NDArray, namespace: str | None = None) -> tuple[list[str], NDArray[np.float32]]:
        """All cosines (ids in index order), for signal extraction."""
        if not self._row:
            self._query(query_vec)
            return [], np.zeros(0, dtype=np.float32)
        scores, rows = self._all_scores(query_vec, namespace)
        if rows is None:
            return list(self._ids), scores.copy()  # type: ignore[arg-type]
        return [self._ids[r] for r in rows.tolist()], scores[rows]  # type: ignore[misc]
