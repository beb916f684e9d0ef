"""The run's results as a Markdown table (printed, and pasted into benchmarks/README.md), the
targets with met/missed, and a PNG of search latency against recall."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import idle

SERVERS = ("vectide", "milvus-lite")
INDEX_TYPES = ("FLAT", "IVF_FLAT", "HNSW")
RECALLS = ("0.90", "0.95", "0.99")
NA = "n/a"


def _get(tree: Any, *path: object, default: Any = None) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return default
        tree = tree[key]
    return tree


def insert_rate(results: dict[str, Any], system: str, kind: str) -> float | None:
    """Rows/s over the collections of one vector format (``lists``: FLAT; ``numpy``: the
    IVF_FLAT and HNSW collections together), synthetic set."""
    if system == "ceiling":
        return _get(results, "systems", "ceiling", "ingest", kind, "rows_per_s")
    per_index = _get(results, "systems", system, "ingest", "synthetic", default={})
    runs = [r for r in per_index.values() if r.get("vectors") == kind]
    seconds = sum(r["insert_s"] for r in runs)
    return sum(r["rows"] for r in runs) / seconds if seconds else None


def search_point(
    results: dict[str, Any], system: str, dataset: str, index: str, recall: str
) -> dict[str, Any] | None:
    return _get(results, "systems", system, "at_recall", dataset, index, recall)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def fresh_point(results: dict[str, Any], system: str) -> dict[str, Any] | None:
    """Serial HNSW searches right after the last insert, before flush (synthetic set)."""
    return _get(results, "systems", system, "fresh_search", "synthetic")


def fresh_share(results: dict[str, Any], system: str) -> float | None:
    """The fresh search rate over the settled rate at recall 0.95 (issue 15 item 1)."""
    fresh = fresh_point(results, system) or {}
    settled = search_point(results, system, "synthetic", "HNSW", "0.95") or {}
    return _ratio(fresh.get("qps"), settled.get("qps"))


def fresh_ratio(results: dict[str, Any], system: str) -> float | None:
    """``fresh_share``, or 0 when the fresh searches' recall is below 0.95 (a rate bought
    with recall does not count)."""
    share = fresh_share(results, system)
    found = _get(fresh_point(results, system), "recall")
    if share is None or found is None:
        return None
    return share if found >= 0.95 else 0.0


def ceilings(results: dict[str, Any]) -> tuple[float | None, float | None]:
    """The no-op server's numpy insert and serial search rates: the fastest of the run's
    measurements (first, and again before each system). The ceiling is the most the client
    gets through; one measured slow (in three of five runs, right after milvus-lite's phase:
    72,107, 72,624 and 77,454 inserts/s against 84,541-93,562 in the same runs) would make
    every ratio to it look better than it is."""
    probes = [system.get("ceiling_probe") or {} for system in results.get("systems", {}).values()]
    inserts = [insert_rate(results, "ceiling", "numpy")]
    inserts += [p.get("insert_numpy_rows_per_s") for p in probes]
    searches = [_get(results, "systems", "ceiling", "search", "qps")]
    searches += [_get(p, "search", "qps") for p in probes]
    return _fastest(inserts), _fastest(searches)


def concurrent_ceiling(results: dict[str, Any]) -> float | None:
    """The no-op server's 8-client rate: the fastest of its own phase and of its windows
    alternating with each system's (``ceilings`` says why the fastest)."""
    systems = results.get("systems", {})
    rates = [_get(system, "ceiling_concurrent", "qps") for system in systems.values()]
    return _fastest([_get(results, "systems", "ceiling", "concurrent", "qps"), *rates])


def _fastest(rates: list[float | None]) -> float | None:
    known = [r for r in rates if r]
    return max(known) if known else None


def settle_time(results: dict[str, Any]) -> float | None:
    """Issue 15 item 2: the synthetic collections' flush (they flush together) and the wait
    until every index reports all rows indexed."""
    flush = _get(results, "systems", "vectide", "flush_s", "synthetic", default={})
    settle = _get(results, "systems", "vectide", "settle_s", "synthetic")
    if not flush or settle is None:
        return None
    return max(flush.values()) + settle


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The README's goals against this run. Goals, never assertions: a miss is reported."""
    v_ins = insert_rate(results, "vectide", "numpy")
    lite_ins = insert_rate(results, "milvus-lite", "numpy")
    v95 = search_point(results, "vectide", "synthetic", "HNSW", "0.95") or {}
    lite95 = search_point(results, "milvus-lite", "synthetic", "HNSW", "0.95") or {}
    ceil_ins, ceil_qps = ceilings(results)
    strong = _get(results, "systems", "vectide", "consistency", "ingesting", "Strong", default={})
    fresh = _get(results, "systems", "vectide", "freshness", "eventually_query", default={})
    idle_end = _get(results, "systems", "vectide", "idle_cpu", "end", "percent", default={})
    kafka = _get(results, "systems", "vectide", "kafka_ingest", default={})
    concurrent = _get(results, "systems", "vectide", "concurrent", "qps")
    ceil_concurrent = concurrent_ceiling(results)
    probe = _get(results, "systems", "vectide", "ceiling_probe", default={})
    goals = [
        (
            "Kafka ingest: producer-to-searchable >= 50% of raw produce (128-d JSON)",
            kafka.get("ratio"),
            0.50,
            "%",
        ),
        (
            "Kafka ingest: produced -> visible (Eventually), p50 <= 1000 ms",
            _get(kafka, "freshness", "p50_ms"),
            1000.0,
            "<ms",
        ),
        ("insert >= 3x milvus-lite (numpy rows)", _ratio(v_ins, lite_ins), 3.0, "x"),
        (
            "insert >= 70% of the client-path ceiling",
            _ratio(v_ins, ceil_ins),
            0.70,
            "%",
            _ratio(v_ins, probe.get("insert_numpy_rows_per_s")),
        ),
        (
            "serial search >= 10x milvus-lite at equal recall (HNSW, recall 0.95)",
            _ratio(v95.get("qps"), lite95.get("qps")),
            10.0,
            "x",
        ),
        (
            "serial search >= 60% of the ceiling (HNSW, recall 0.95)",
            _ratio(v95.get("qps"), ceil_qps),
            0.60,
            "%",
            _ratio(v95.get("qps"), _get(probe, "search", "qps")),
        ),
        (
            "8 concurrent clients >= 60% of the ceiling's 8-client rate (HNSW, recall 0.95)",
            _ratio(concurrent, ceil_concurrent),
            0.60,
            "%",
            window_ratios(results, "vectide"),
        ),
        (
            "flush() and index builds after the last insert <= 30 s (synthetic)",
            settle_time(results),
            30.0,
            "<s",
        ),
        (
            "search right after insert (before flush) >= 50% of the settled rate at recall "
            ">= 0.95 (HNSW; 0 if its own recall < 0.95)",
            fresh_ratio(results, "vectide"),
            0.50,
            "%",
        ),
        ("Strong search p50 <= 60 ms while ingesting", strong.get("p50_ms"), 60.0, "<ms"),
        ("Strong search p99 <= 150 ms while ingesting", strong.get("p99_ms"), 150.0, "<ms"),
        (
            "freshness: insert ack -> Eventually query, p50 <= 30 ms",
            fresh.get("p50_ms"),
            30.0,
            "<ms",
        ),
        ("idle deployment <= 10% of one core (end of run)", idle_end.get("total"), 10.0, "<%"),
    ]
    out = []
    for name, value, goal, unit, *beside in goals:
        met = None if value is None else (value <= goal if unit[0] == "<" else value >= goal)
        target = {"target": name, "measured": value, "goal": goal, "unit": unit, "met": met}
        if beside and beside[0]:
            target["beside"] = beside[0]
        out.append(target)
    return out


def window_ratios(results: dict[str, Any], system: str) -> list[float] | None:
    """Each of ``system``'s 8-client windows against the no-op window measured right before
    it: what the ratio to the run's fastest no-op measurement hides of the box's swings."""
    mine = _get(results, "systems", system, "concurrent", "rounds", default=[])
    noop = _get(results, "systems", system, "ceiling_concurrent", "rounds", default=[])
    ratios = [r for r in (_ratio(a, b) for a, b in zip(mine, noop, strict=False)) if r]
    return ratios or None


# -- formatting -------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 0) -> str:
    if value is None or value != value:
        return NA
    return f"{value:,.{digits}f}"


def _ms(value: float | None) -> str:
    if value is None or value != value:
        return NA
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _lat(point: dict[str, Any] | None) -> str:
    if not point:
        return NA
    return f"{_ms(point.get('p50_ms'))} / {_ms(point.get('p99_ms'))}"


def _search_cell(point: dict[str, Any] | None, ran: bool = True) -> str:
    if not point:
        return "not reached" if ran else NA
    setting = f" ({point['param']}={point['value']})" if point.get("param") else ""
    return f"{_lat(point)} ms, {_num(point.get('qps'))}/s{setting}"


def _fresh_cell(point: dict[str, Any] | None) -> str:
    if not point:
        return NA
    return f"{_lat(point)} ms, {_num(point.get('qps'))}/s, recall {point['recall']:.3f}"


def _rows(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def ingest_table(results: dict[str, Any]) -> str:
    systems = ("vectide", "milvus-lite", "ceiling")
    broker = _get(results, "systems", "vectide", "broker", default={})
    visible = [
        _get(results, "systems", s, "visible_after_ingest_s", "synthetic", "HNSW") for s in systems
    ]
    rows = [
        ["insert rows/s, row dicts with list vectors"]
        + [_num(insert_rate(results, s, "lists")) for s in systems]
        + [NA],
        ["insert rows/s, row dicts with numpy vectors"]
        + [_num(insert_rate(results, s, "numpy")) for s in systems]
        + [_num(_get(broker, "acked_per_batch", "rows_per_s"))],
        [
            "pipelined (broker: every batch queued, one flush)",
            NA,
            NA,
            NA,
            _num(_get(broker, "pipelined", "rows_per_s")),
        ],
        ["no-op server re-measured just before the system, numpy rows/s"]
        + [
            _num(_get(results, "systems", s, "ceiling_probe", "insert_numpy_rows_per_s"))
            for s in systems[:2]
        ]
        + [NA, NA],
        ["all rows visible to Strong count after the last ack, s"]
        + [_num(v, 2) if v is not None else NA for v in visible[:2]]
        + [NA, NA],
    ]
    header = [
        "ingest (synthetic)",
        "Vectide",
        "milvus-lite",
        "ceiling (no-op server)",
        "broker raw produce",
    ]
    return _rows(header, rows)


def search_table(results: dict[str, Any], dataset: str) -> str:
    systems = ("vectide", "milvus-lite", "faiss")
    rows = []
    for index in INDEX_TYPES:
        for recall in RECALLS if index != "FLAT" else ("0.99",):
            label = f"{index} exact" if index == "FLAT" else f"{index} recall >= {recall}"
            points = [search_point(results, s, dataset, index, recall) for s in systems]
            ratio = _ratio(_get(points[0], "qps"), _get(points[1], "qps"))
            cells = [
                _search_cell(p, _get(results, "systems", s, "search", dataset, index) is not None)
                for p, s in zip(points, systems, strict=True)
            ]
            rows.append([label, *cells, f"{ratio:.1f}x" if ratio else NA])
    if dataset == "synthetic":
        fresh = [fresh_point(results, s) for s in systems[:2]]
        ratio = _ratio(_get(fresh[0], "qps"), _get(fresh[1], "qps"))
        ef = next((p["value"] for p in fresh if p), None)
        rows.append(
            [f"HNSW right after the last insert, before flush (ef={ef})"]
            + [_fresh_cell(p) for p in fresh]
            + [NA, f"{ratio:.1f}x" if ratio else NA]
        )
        shares = [fresh_share(results, s) for s in systems[:2]]
        rows.append(
            ["  its rate / the settled rate at recall >= 0.95"]
            + [f"{share:.0%}" if share else NA for share in shares]
            + [NA, NA]
        )
        ceiling = _get(results, "systems", "ceiling", "search")
        rows.append(["no-op server (ceiling), serial", NA, NA, NA, _search_cell(ceiling)])
        probes = [_get(results, "systems", s, "ceiling_probe", "search") for s in systems[:2]]
        rows.append(
            ["no-op server re-measured just before the system, serial"]
            + [_search_cell(p, p is not None) for p in probes]
            + [NA, NA]
        )
        conc = [_get(results, "systems", s, "concurrent") for s in (*systems, "ceiling")]
        clients = _get(results, "options", "clients")
        rows.append(
            [f"{clients} concurrent clients, HNSW recall >= 0.95, searches/s (fastest window)"]
            + [_num(_get(c, "qps")) for c in conc]
        )
        again = [_get(results, "systems", s, "ceiling_concurrent", "qps") for s in systems[:2]]
        rows.append(
            [f"no-op server in windows alternating with the system's, {clients} clients"]
            + [_num(q) for q in again]
            + [NA, NA]
        )
    header = [
        "serial search, p50 / p99, rate",
        "Vectide",
        "milvus-lite",
        "faiss in-process",
        "Vectide / milvus-lite",
    ]
    return _rows(header, rows)


def consistency_table(results: dict[str, Any]) -> str:
    rows = []
    for level in ("Strong", "Session", "Bounded", "Eventually"):
        row = [level]
        for system in SERVERS:
            for phase in ("idle", "ingesting"):
                row.append(_lat(_get(results, "systems", system, "consistency", phase, level)))
        rows.append(row)
    rates = [
        _num(_get(results, "systems", s, "consistency", "ingest", "rows_per_s")) for s in SERVERS
    ]
    rows.append(["background ingest achieved, rows/s", NA, rates[0], NA, rates[1]])
    header = [
        "search p50 / p99 ms (HNSW)",
        "Vectide idle",
        "Vectide ingesting",
        "milvus-lite idle",
        "milvus-lite ingesting",
    ]
    return _rows(header, rows)


def freshness_table(results: dict[str, Any]) -> str:
    rows = []
    for phase, when in (("freshness_at_start", "fresh deployment"), ("freshness", "end of run")):
        for key, label in (
            ("strong_search", "insert ack -> Strong search returns it"),
            ("eventually_query", "insert ack -> Eventually query (polled) returns it"),
        ):
            rows.append(
                [f"{label}, {when}, p50 / p99 ms"]
                + [_lat(_get(results, "systems", s, phase, key)) for s in SERVERS]
            )
    return _rows(["freshness", "Vectide", "milvus-lite"], rows)


def memory_table(results: dict[str, Any]) -> str:
    rows = []
    for system in SERVERS:
        mem = _get(results, "systems", system, "memory", default={})
        for proc, loaded in mem.get("rss_loaded_mib", {}).items():
            rows.append(
                [
                    f"{system}: {proc}",
                    _num(mem.get("rss_start_mib", {}).get(proc)),
                    _num(loaded),
                    _num(mem.get("mib_per_million_vectors", {}).get(proc)),
                ]
            )
    return _rows(["process", "RSS at start, MiB", "RSS loaded, MiB", "MiB per 1M vectors"], rows)


def kafka_cpu_table(results: dict[str, Any]) -> str:
    """Where the Kafka ingest path's CPU goes, per record, beside the raw produce's: the sum
    over processes bounds the rate a number of cores allows, whatever the parallelism."""
    cpu = _get(results, "systems", "vectide", "kafka_ingest", "cpu_us_per_record", default={})
    raw, path = cpu.get("raw_produce", {}), cpu.get("producer_to_searchable", {})
    if not path:
        return ""
    names = [n for n in {**raw, **path} if n != "total"] + ["total"]
    rows = [[n, _num(raw.get(n), 1), _num(path.get(n), 1)] for n in names]
    header = ["Kafka ingest, CPU us per record", "raw produce", "producer -> searchable"]
    return _rows(header, rows)


def scaling_table(results: dict[str, Any]) -> str:
    """Issue 18's figures: 1 vs 2 query nodes, and the balancer simulation."""
    lines = ["Query nodes (issue 18)"]
    scaling = results.get("query_scaling")
    if scaling:
        one, two = scaling["one_node"], scaling["two_nodes"]
        usage = ", ".join(
            f"node {n['node_id']} {n.get('memory_percent', 0):.0f} %" for n in two["nodes"]
        )
        lines += [
            f"  {one['clients']} clients, {scaling['rows']:,} rows in flushed HNSW segments: "
            f"1 query node {_num(one['qps'])}/s, 2 query nodes {_num(two['qps'])}/s "
            f"(x{scaling['ratio']}); the second node served segments "
            f"{scaling['balanced_after_s']}s after joining",
            f"  memory after balancing ({scaling['memory_limit_mb']} MB limit): {usage}; "
            f"spread {scaling['memory_spread_percent']} points",
        ]
    sim = results.get("balance_sim")
    if sim:
        lines.append(
            f"  simulated: {sim['nodes']} nodes, {sim['segments']} segments: spread "
            f"{sim['spread_before']} -> {sim['spread_after']} points in {sim['rounds']} rounds, "
            f"{sim['moves']} moves ({sim['moved_gb']} GB), {sim['seconds']}s of planning"
        )
    return "\n".join(lines)


def targets_table(results: dict[str, Any]) -> str:
    rows = []
    for t in results.get("targets", []):
        value, unit = t["measured"], t["unit"]
        if value is None:
            shown = NA
        elif unit == "%":
            shown = f"{value:.1%}"
        elif unit == "x":
            shown = f"{value:.2f}x"
        elif unit == "<%":
            shown = f"{value:.1f} % of a core"
        elif unit == "<s":
            shown = f"{value:.1f} s"
        else:
            shown = f"{value:.1f} ms"
        beside = t.get("beside")
        if isinstance(beside, list):
            shown += f" ({', '.join(f'{r:.0%}' for r in beside)} of the no-op windows beside)"
        elif beside:
            shown += f" ({beside:.0%} of the no-op server measured just before)"
        met = {True: "met", False: "missed", None: "not measured"}[t["met"]]
        rows.append([t["target"], shown, met])
    return _rows(["target (goal, not a test)", "measured", ""], rows)


def _load_line(results: dict[str, Any]) -> str:
    """The machine is shared: how busy it was when each system's phase began."""
    loads = results.get("load_average", {})
    shown = ", ".join(f"{name} {values[0]:.1f}" for name, values in loads.items())
    return f"1-minute load average as each phase began (2 CPUs): {shown}" if shown else ""


def table(results: dict[str, Any]) -> str:
    synthetic = next((d for d in results["datasets"] if d["name"] == "synthetic"), {})
    parts = [
        f"Synthetic: {synthetic.get('rows', 0):,} x {synthetic.get('dim')} "
        f"({synthetic.get('metric')}), {synthetic.get('queries')} queries, k=10, "
        f"{results['options']['batch']}-row insert batches; machine: "
        f"{results['machine']['cpus']} CPUs {results['machine']['cpu_model']}, "
        f"{results['machine']['memory_gib']} GiB",
        _load_line(results),
        "",
        ingest_table(results),
        "",
        search_table(results, "synthetic"),
    ]
    text = next((d for d in results["datasets"] if d["name"] == "text"), None)
    if text:
        parts += [
            "",
            f"Text: {text['rows']:,} x {text['dim']} ({text['metric']}), {text['queries']} "
            f"queries: {text['description']}",
            "",
            search_table(results, "text"),
        ]
    parts += ["", consistency_table(results), "", freshness_table(results), ""]
    parts += [memory_table(results), "", idle.report_table(results), ""]
    if kafka_cpu := kafka_cpu_table(results):
        parts += [kafka_cpu, ""]
    parts += [scaling_table(results), ""]
    parts += [targets_table(results)]
    for note in results.get("skipped", []):
        parts += ["", f"Note: {note}"]
    return "\n".join(parts)


# -- the plot ---------------------------------------------------------------------------------

COLORS = {"vectide": "tab:blue", "milvus-lite": "tab:orange", "faiss": "tab:green"}
STYLES = {"FLAT": ("s", ":"), "IVF_FLAT": ("o", "--"), "HNSW": ("^", "-")}


def plot(results: dict[str, Any], path: Path) -> None:
    """p50 latency (log) against recall@10, one panel per dataset, one line per system and
    index; the no-op server's p50 as the floor any pymilvus round trip pays."""
    import matplotlib  # a bench extra: the tables need none of it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use: the backend is chosen first

    names = [d["name"] for d in results["datasets"]]
    fig, axes = plt.subplots(1, len(names), figsize=(6.5 * len(names), 4.8), squeeze=False)
    for ax, dataset in zip(axes[0], names, strict=True):
        for system, color in COLORS.items():
            for index, (marker, style) in STYLES.items():
                points = _get(results, "systems", system, "search", dataset, index)
                if not points:
                    continue
                xs = [p["recall"] for p in points]
                ys = [p["p50_ms"] for p in points]
                ax.plot(
                    xs,
                    ys,
                    marker=marker,
                    linestyle=style,
                    color=color,
                    markersize=4,
                    label=f"{system} {index}",
                )
        ceiling = _get(results, "systems", "ceiling", "search", "p50_ms")
        if ceiling:
            ax.axhline(
                ceiling,
                color="grey",
                linestyle="-.",
                linewidth=1,
                label="no-op server (client path)",
            )
        ax.set_yscale("log")
        ax.set_xlabel("recall@10")
        ax.set_ylabel("serial search latency p50, ms")
        ax.set_title(f"{dataset}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Search latency vs recall (same client, same data, one run)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
