"""Which faiss index a vector index is, and how it is built and searched.

Shared by the roles that build or choose faiss indexes: the query node (chunk indexes of
growing shards), the index node (index files of sealed segments), the querycoord and the
proxy (whether an index is built by faiss at all: ``is_interim``).
"""

from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

from vectide.services.common import vector_types
from vectide.services.common.schema import CollectionSchema, IndexInfo

APPROXIMATE = frozenset({"IVF_FLAT", "HNSW", "AUTOINDEX"})


@dataclass(frozen=True)
class IndexSpec:
    index_type: str
    metric: str
    params: dict[str, str]

    @classmethod
    def of(cls, info: IndexInfo) -> IndexSpec:
        return cls(info.index_type.upper(), info.metric_type.upper(), dict(info.params))

    @property
    def approximate(self) -> bool:
        return self.index_type in APPROXIMATE

    def _int(self, key: str, default: int) -> int:
        try:
            return int(self.params.get(key, default))
        except ValueError:
            return default

    def build(self, vectors: np.ndarray) -> faiss.Index:
        """An index over ``vectors`` (COSINE: over their normalised copies, searched by IP)."""
        dim = vectors.shape[1]
        metric = faiss.METRIC_L2 if self.metric == "L2" else faiss.METRIC_INNER_PRODUCT
        data = normalised(vectors) if self.metric == "COSINE" else np.ascontiguousarray(vectors)
        if self.index_type == "IVF_FLAT":
            nlist = max(1, min(self._int("nlist", 128), len(data) // 39))
            index = faiss.IndexIVFFlat(faiss.IndexFlat(dim, metric), dim, nlist, metric)
            index.train(data)
        else:
            index = faiss.IndexHNSWFlat(dim, self._int("M", 16), metric)
            index.hnsw.efConstruction = self._int("efConstruction", 200)
        index.add(data)
        return index

    def search_params(
        self, selector: faiss.IDSelector | None, k: int, params: dict[str, object]
    ) -> faiss.SearchParameters:
        if self.index_type == "IVF_FLAT":
            return faiss.SearchParametersIVF(sel=selector, nprobe=int(params.get("nprobe", 16)))
        ef = max(int(params.get("ef", 64)), k)
        return faiss.SearchParametersHNSW(sel=selector, efSearch=ef)


def is_interim(index: IndexInfo, schema: CollectionSchema) -> bool:
    """Whether ``index`` is built by faiss (chunk indexes, index files): approximate float
    vector indexes. Binary and sparse vectors are searched exactly whatever their index
    (AUTOINDEX included), as FLAT is."""
    field = schema.field(index.field_name)
    return (
        field is not None
        and field.data_type in vector_types.FLOAT_TYPES
        and IndexSpec.of(index).approximate
    )


def normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.where(norms == 0, 1, norms), dtype=np.float32)
