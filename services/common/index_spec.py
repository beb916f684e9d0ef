"""Which faiss index a vector index is, and how it is built and searched.

Shared by the roles that build or choose faiss indexes: the query node (chunk indexes of
growing shards, :class:`InterimIndex`), the index node (index files of sealed segments), the
querycoord and the proxy (whether an index is built by faiss at all: ``is_interim``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import faiss
import numpy as np

from vectide.services.common import vector_types
from vectide.services.common.config import QueryConfig
from vectide.services.common.schema import CollectionSchema, IndexInfo

APPROXIMATE = frozenset({"IVF_FLAT", "HNSW", "AUTOINDEX"})
#: lists an IVF search probes when the request names no ``nprobe``
DEFAULT_NPROBE = 16
#: a quickly trained IVF index learns its lists from a sample of this many rows per list,
#: in this many k-means rounds (faiss: 256 per list, 10 rounds for IVF); the lists it gets
#: are a little worse, which probing a few more of them makes up for. 5 rounds instead of 10
#: halved a 16k chunk's training (39 -> 20 ms of a core) at the same recall@10 at 16 probes
#: (clustered 0.993 both, uniform 0.421 against 0.411)
SAMPLE_ROWS_PER_LIST = 64
QUICK_TRAIN_ROUNDS = 5
#: a sealed segment's interim stand-in has at most this level's lists (256): it is trained
#: while the index node builds the segment's file on every core, and 1,024 lists learnt from
#: 64k sampled rows took tens of seconds of a loaded 2-core box (512: still 16 % of the
#: standalone's samples at 1M rows); 256 lists of a 500k-row segment scan ~31k rows a search
#: (the exact scan: 500k), for an index the file soon replaces
STAND_IN_MAX_LEVEL = 1
#: the kinds of interim index a query node may build for growing chunks
INTERIM_KINDS = ("IVF_FLAT", "collection")


@dataclass(frozen=True)
class IndexSpec:
    index_type: str
    metric: str
    params: dict[str, str]
    #: IVF: the fewest lists every search probes, whatever it asks (an interim index's nprobe)
    min_nprobe: int = 0
    #: IVF: train on a sample, in fewer rounds (an interim index, built while rows stream in)
    quick_train: bool = False
    #: interim IVF: this many neighbouring blocks of one level merge into one block of the
    #: next (``merged``); 0 or 1: never (one index per chunk)
    merge_fanout: int = 0

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

    def build(self, vectors: np.ndarray, rows: np.ndarray | None = None) -> faiss.Index:
        """An index over ``vectors`` (COSINE: over their normalised copies, searched by IP),
        labelled by position; with ``rows`` (a nullable field's rows holding a vector, whose
        vectors ``vectors`` are), labelled by those offsets: a search's mask and hits stay in
        row terms, and null rows take no place in the graph or the lists."""
        data = self._rows(vectors)
        if rows is not None and not len(rows):
            return faiss.IndexIDMap2(faiss.IndexFlat(vectors.shape[1], self._faiss_metric))
        if self.index_type == "IVF_FLAT":
            index = self._empty_ivf(data)
            index.train(self._training_rows(data, index.nlist, index))
        else:
            index = faiss.IndexHNSWFlat(data.shape[1], self._int("M", 16), self._faiss_metric)
            index.hnsw.efConstruction = self._int("efConstruction", 200)
        return _filled(index, data, rows)

    @property
    def _faiss_metric(self) -> int:
        return faiss.METRIC_L2 if self.metric == "L2" else faiss.METRIC_INNER_PRODUCT

    def _rows(self, vectors: np.ndarray) -> np.ndarray:
        """The rows as faiss indexes them: COSINE's normalised, the others contiguous."""
        return normalised(vectors) if self.metric == "COSINE" else np.ascontiguousarray(vectors)

    def _empty_ivf(self, data: np.ndarray) -> faiss.IndexIVFFlat:
        """An untrained IVF_FLAT for ``data``: ``nlist`` lists, at most one per 39 rows."""
        dim, metric = data.shape[1], self._faiss_metric
        nlist = max(1, min(self._int("nlist", 128), len(data) // 39))
        return faiss.IndexIVFFlat(faiss.IndexFlat(dim, metric), dim, nlist, metric)

    def merge_of(
        self, vectors: np.ndarray, parts: list[faiss.Index], rows: np.ndarray | None = None
    ) -> faiss.Index:
        """An IVF index over ``vectors``, the rows of ``parts`` (IVF indexes, in order),
        whose lists are learnt from the parts' lists: k-means over their centroids, each
        weighted by its list's length, instead of over sampled rows. The merged lists fit
        the rows as well (recall@10 at 16 probes on 64k rows: clustered 0.988 against 0.987,
        sorted by a coordinate 0.989 against 0.985, uniform 0.268 against 0.275) and a 4 x
        16k merge costs 76-98 ms of a core instead of 233-249 (training was 60 % of it).
        ``rows``: as ``build``'s."""
        if self.index_type != "IVF_FLAT" or not all(isinstance(p, faiss.IndexIVF) for p in parts):
            return self.build(vectors, rows)  # (a part of only null rows is an empty id map)
        data = self._rows(vectors)
        index = self._empty_ivf(data)
        ivfs = [faiss.extract_index_ivf(p) for p in parts]
        if sum(i.nlist for i in ivfs) < index.nlist:  # too few lists to learn from: rows
            return self.build(vectors, rows)
        centroids = np.vstack([i.quantizer.reconstruct_n(0, i.nlist) for i in ivfs])
        weights = np.concatenate(
            [[i.invlists.list_size(j) for j in range(i.nlist)] for i in ivfs]
        ).astype(np.float32)
        clustering = faiss.Clustering(index.d, index.nlist, index.cp)
        clustering.min_points_per_centroid = 1  # few points by design: no faiss warning
        clustering.train(np.ascontiguousarray(centroids), index.quantizer, weights)
        index.is_trained = True
        return _filled(index, data, rows)

    def _training_rows(self, data: np.ndarray, nlist: int, index: faiss.IndexIVF) -> np.ndarray:
        """The rows an IVF index learns its lists from: all of them, or for a quick build a
        seeded sample (the same chunk always gets the same lists) and fewer k-means rounds."""
        if not self.quick_train:
            return data
        index.cp.niter = QUICK_TRAIN_ROUNDS
        rows = SAMPLE_ROWS_PER_LIST * nlist
        if rows >= len(data):
            return data
        picked = np.random.default_rng(len(data)).choice(len(data), rows, replace=False)
        return data[np.sort(picked)]

    def merged(self, level: int) -> IndexSpec:
        """The spec of an interim IVF block merged up to ``level`` (blocks of ``merge_fanout``
        = 4 blocks each: 16k, 64k, 256k, 1M rows): twice the lists per level, as lists grow
        with the square root of the rows (128, 256, 512, 1,024), and twice the probes every
        third level (16, 16, 16, 32). On the bench's clustered set, searched one block each,
        recall@10 stays >= 0.99 per block (0.97 at 1,024 lists and 16 probes), and 1M rows
        as 7 blocks reach 0.993 at a third of the CPU of 61 chunks (0.946)."""
        return IndexSpec(
            self.index_type,
            self.metric,
            {**self.params, "nlist": str(self._int("nlist", 128) << level)},
            min_nprobe=(self.min_nprobe or DEFAULT_NPROBE) << (level // 3),
            quick_train=self.quick_train,
            merge_fanout=self.merge_fanout,
        )

    def search_params(
        self, selector: faiss.IDSelector | None, k: int, params: dict[str, object]
    ) -> faiss.SearchParameters:
        if self.index_type == "IVF_FLAT":
            nprobe = max(int(params.get("nprobe", 0)), self.min_nprobe) or DEFAULT_NPROBE
            if selector is None:
                return _shared_params("IVF", nprobe)
            return faiss.SearchParametersIVF(sel=selector, nprobe=nprobe)
        ef = max(int(params.get("ef", 64)), k)
        if selector is None:
            return _shared_params("HNSW", ef)
        return faiss.SearchParametersHNSW(sel=selector, efSearch=ef)


@functools.lru_cache(maxsize=256)
def _shared_params(kind: str, value: int) -> faiss.SearchParameters:
    """Search parameters without an ID selector, made once per value: faiss only reads
    them, so concurrent searches share one (a new SWIG object costs every search ~5 us)."""
    if kind == "IVF":
        return faiss.SearchParametersIVF(nprobe=value)
    return faiss.SearchParametersHNSW(efSearch=value)


@dataclass(frozen=True)
class InterimIndex:
    """Which index a query node builds over each full chunk of a shard's growing rows (Milvus's
    ``queryNode.segcore.interimIndex``: IVF_FLAT_CC, nlist 128, nprobe 16, whatever the
    collection's index), merged as the chunks accumulate (``merge_fanout``, ``merged``).

    The collection's own index (HNSW: 2.3-3.5 s of a core per 16k-row chunk of 128-d
    vectors) held the insert rate down while the chunks streamed in; a quickly trained
    IVF_FLAT costs ~0.06 s, and probing ``nprobe`` of ``nlist`` lists of a 16k chunk finds
    nearly every true neighbour. Sealed segments keep the index node's index file of the
    collection's type. ``kind="collection"``: growing chunks get the collection's index.
    """

    kind: str = "IVF_FLAT"
    nlist: int = 128
    nprobe: int = DEFAULT_NPROBE
    #: neighbouring IVF_FLAT blocks merged into one, level by level (0, 1: never)
    merge_fanout: int = 4

    def __post_init__(self) -> None:
        if self.kind not in INTERIM_KINDS:
            raise ValueError(
                f"query.interim_index={self.kind!r}: expected one of {', '.join(INTERIM_KINDS)}"
            )
        if self.merge_fanout < 0:
            raise ValueError(f"query.interim_merge_fanout={self.merge_fanout}: must be >= 0")
        if self.nlist < 1 or self.nprobe < 1:
            raise ValueError(
                f"query.interim_nlist={self.nlist}, query.interim_nprobe={self.nprobe}: "
                "both must be at least 1"
            )

    def spec_for(self, spec: IndexSpec) -> IndexSpec:
        """The spec growing chunks of a field indexed as ``spec`` are built and searched by.
        A search probes ``nprobe`` lists, or more if it asks for more (an IVF_FLAT
        collection's own ``nprobe``)."""
        if self.kind == "collection":
            return spec
        return IndexSpec(
            "IVF_FLAT",
            spec.metric,
            {"nlist": str(self.nlist)},
            min_nprobe=self.nprobe,
            quick_train=True,
            merge_fanout=self.merge_fanout if self.merge_fanout > 1 else 0,
        )

    def sealed_spec(self, spec: IndexSpec, rows: int, chunk_rows: int) -> IndexSpec | None:
        """The interim index a sealed segment of ``rows`` rows gets until the index node's
        file of ``spec`` arrives: one block of the level its rows fill (16k rows: 128 lists,
        more: 256), at most ``STAND_IN_MAX_LEVEL``. None: kept
        exact (an interim index of the collection's own type: HNSW would take minutes)."""
        interim = self.spec_for(spec)
        if not interim.quick_train or rows < chunk_rows:
            return None
        level = 0
        while level < STAND_IN_MAX_LEVEL and chunk_rows * max(self.merge_fanout, 2) ** level < rows:
            level += 1
        return interim.merged(level)


def interim_index(query: QueryConfig) -> InterimIndex:
    """The interim index the configuration asks for (``query.interim_*``)."""
    return InterimIndex(
        query.interim_index, query.interim_nlist, query.interim_nprobe, query.interim_merge_fanout
    )


def chunk_spec(index: IndexInfo, interim: InterimIndex | None) -> IndexSpec:
    """The spec chunk indexes of ``index``'s field are built and searched by: the interim
    one for growing rows, the collection's own (``interim`` None) for a sealed segment."""
    spec = IndexSpec.of(index)
    return spec if interim is None else interim.spec_for(spec)


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


def _filled(index: faiss.Index, data: np.ndarray, rows: np.ndarray | None) -> faiss.Index:
    """``index`` holding ``data``, labelled by position or, with ``rows``, by those offsets
    (IVF lists keep ids; any other index goes behind an id map)."""
    if rows is None:
        index.add(data)
        return index
    if not isinstance(index, faiss.IndexIVF):
        index = faiss.IndexIDMap2(index)
    index.add_with_ids(data, rows.astype(np.int64))
    return index
