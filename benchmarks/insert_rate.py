"""``python -m benchmarks.insert_rate``: pymilvus insert rows/s, Vectide beside the ceiling.

The insert figure of ``make bench`` alone, in a few minutes: the no-op server
(``benchmarks.nullserver``) and a standalone Vectide (with its Spark data node, as ``vectide
up`` runs it) both started, then ``--rounds`` rounds, each inserting the same rows (numpy
vectors, ``--batch``-row calls, into a fresh collection created with its index and loaded)
into the ceiling and then into Vectide, back to back, so both see the same machine load
(each round waits first until the deployment is quiet). It prints every round and the
medians, and the ratio; per round also where the time went: the client's encoding
(pymilvus's ``row_insert_param``, the same work for both servers: it takes longer when the
server's processes compete for the cores), the proxy's Insert handler (its latency
histogram), and each process's CPU in microseconds per inserted row, while the client
inserted and until the deployment was quiet again (what the rows cost after their
acknowledgement: the query node's apply, interim index builds, persistence). CPU per row is
the figure to compare on a shared box: rows/s moves with whatever else runs, CPU per row
much less. ``--thread-cpu`` splits the standalone's by thread (names from ``py-spy dump``).

``--profile`` samples the standalone process with py-spy during Vectide's inserts
(``--py-spy`` options: ``--threads``, ``--idle``, ``--gil``) and prints the top functions;
raw files stay under ``.vectide/bench/profiles``. ``--nice datanode[,infra:kafka,...]``
(with ``--alternate``: in every other round only) is an experiment: those processes'
scheduler group gets ``--nice-value`` (19), so they run on what the others leave.
``--index FLAT`` (no interim index builds) and ``--no-datanode`` take those parts out of the
comparison.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pymilvus.client.prepare import Prepare

from benchmarks import datasets
from benchmarks.common import apply_set, log, own_tree, stop_on_sigterm
from benchmarks.cores import add_core_options, core_split
from benchmarks.milvus_ops import connect, create_collection, ingest
from benchmarks.profiling import Profile, py_spy, summarise
from benchmarks.targets import RUN_DIR, VectideTarget, null_target, vectide_target


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--index", default="HNSW", help="FLAT, IVF_FLAT or HNSW")
    p.add_argument("--lists", action="store_true", help="list vectors instead of numpy rows")
    p.add_argument("--profile", action="store_true", help="py-spy the standalone process")
    p.add_argument("--label", default="insert", help="names the profile file")
    p.add_argument("--py-spy", default="--threads", help="py-spy options, e.g. '--threads --gil'")
    add_nice_options(p, 19)
    p.add_argument("--no-datanode", action="store_true", help="Vectide without its data node")
    p.add_argument("--set", action="append", default=[], help="section.key=value (repeatable)")
    p.add_argument(
        "--thread-cpu", action="store_true", help="CPU per row of each standalone thread"
    )
    p.add_argument("--settle", type=float, default=60.0, help="max s to wait for quiet")
    add_core_options(p)
    return p.parse_args(argv)


class ClientEncoding:
    """Seconds pymilvus spends turning row dicts into an InsertRequest (client CPU, before
    the call goes out): the rest of an insert call is the round trip."""

    seconds = 0.0

    @classmethod
    def install(cls) -> None:
        original = Prepare.row_insert_param.__func__  # type: ignore[attr-defined]

        def timed(klass: type, *args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return original(klass, *args, **kwargs)
            finally:
                cls.seconds += time.perf_counter() - start

        Prepare.row_insert_param = classmethod(timed)  # type: ignore[method-assign]


@dataclass
class Round:
    """One fill: its rate, and CPU microseconds per row of each process, while the client
    inserted and until the deployment was quiet again (the work inserts leave behind:
    the query node's apply, interim index builds, persistence)."""

    rows_per_s: float
    insert_s: float
    encoding_s: float
    us_per_row: dict[str, float] = field(default_factory=dict)
    settled_us_per_row: dict[str, float] = field(default_factory=dict)


def insert_round(
    uri: str,
    name: str,
    opts: argparse.Namespace,
    vectors,
    label: str,
    pids: dict[str, int],
    when_settled: Callable[[], None] = lambda: None,
) -> Round:
    """Rows/s of one fill of a fresh collection (time inside ``insert`` calls).
    ``when_settled`` runs before the collection is dropped (its shard threads still live)."""
    client = connect(uri)
    create_collection(client, name, opts.dim, "L2", opts.index)
    encoding = ClientEncoding.seconds
    before = cpu_seconds(pids)
    res = ingest(client, name, vectors, opts.batch, opts.lists, label)
    inserted = cpu_seconds(pids)
    encoding = ClientEncoding.seconds - encoding
    settle(pids, opts.settle)
    settled = cpu_seconds(pids)
    when_settled()
    log(f"{label}: {res.insert_s:.2f} s in insert calls, {encoding:.2f} s of it encoding")
    client.drop_collection(name)
    client.close()
    return Round(
        res.rows_per_s,
        res.insert_s,
        encoding,
        per_row(before, inserted, res.rows),
        per_row(before, settled, res.rows),
    )


def per_row(before: dict[str, float], after: dict[str, float], rows: int) -> dict[str, float]:
    return {n: (after[n] - before[n]) * 1e6 / rows for n in after if n in before}


def cpu_share(before: dict[str, float], after: dict[str, float], seconds: float) -> str:
    """Each process's CPU between two readings, as % of one core over ``seconds``."""
    used = {n: (after[n] - before[n]) / seconds * 100 for n in after if n in before}
    top = sorted(used.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{n} {v:.0f}" for n, v in top if v >= 1) + f"; total {sum(used.values()):.0f}"


def us_line(used: dict[str, float]) -> str:
    top = sorted(used.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{n} {v:.1f}" for n, v in top if v >= 0.1) + (
        f"; total {sum(used.values()):.1f}"
    )


def main(argv: list[str] | None = None) -> None:
    stop_on_sigterm()
    opts = parse_args(argv)
    ClientEncoding.install()
    data = datasets.synthetic(opts.rows, opts.dim, 10, 10)
    ceiling, vectide = null_target(), vectide_target("insertrate")
    apply_set(vectide.config, opts.set)
    rates: dict[str, list[float]] = {"ceiling": [], "vectide": []}
    cpu: dict[str, list[dict[str, float]]] = {"inserting": [], "settled": []}
    split = core_split(opts)
    ceiling.start()
    try:
        vectide.start_infra()
        vectide.deployment.up("standalone", datanode=not opts.no_datanode)
        found = vectide.processes()
        if split:
            pinned = split.pin_servers([*found.values(), *ceiling.processes().values()])
            log(f"{split} ({pinned} server processes)")
        pid = found.get("standalone")
        by_pid = {p: name for name, p in found.items() if name != "standalone"}
        by_pid[pid] = "standalone"  # the roles it runs share its pid
        pids = {**{name: p for p, name in by_pid.items()}, "client": os.getpid()}
        niced = [pids[name] for name in filter(None, opts.nice.split(","))]
        ceiling_pids = {**ceiling.processes(), "client": os.getpid()}
        for r in range(opts.rounds):
            set_autogroup_nice(niced, 0 if opts.alternate and r % 2 else opts.nice_value)
            settle(pids, opts.settle)
            ceil = insert_round(ceiling.uri, f"c{r}", opts, data.vectors, "ceil", ceiling_pids)
            rates["ceiling"].append(ceil.rows_per_s)
            path = RUN_DIR / "profiles" / f"{opts.label}-{r}.txt"
            served, threads = insert_seconds(vectide), thread_cpu(pid, opts.thread_cpu)

            def by_thread(threads: dict[int, float] = threads) -> None:
                if opts.thread_cpu:
                    log_threads(pid, threads, thread_cpu(pid, True), opts.rows)

            with Profile(pid, path, opts.profile, opts.py_spy.split()):
                vect = insert_round(
                    vectide.uri, f"v{r}", opts, data.vectors, "vectide", pids, by_thread
                )
            rates["vectide"].append(vect.rows_per_s)
            served = insert_seconds(vectide) - served
            log(
                f"round {r}: inside the proxy's Insert handler {served:.2f} s, "
                f"{vect.insert_s:.2f} s in the client's insert calls"
            )
            log(f"round {r}: ceiling {ceil.rows_per_s:,.0f} vectide {vect.rows_per_s:,.0f} rows/s")
            log(f"round {r}: ceiling CPU us/row while inserting: {us_line(ceil.us_per_row)}")
            log(f"round {r}: vectide CPU us/row while inserting: {us_line(vect.us_per_row)}")
            log(f"round {r}: vectide CPU us/row until quiet: {us_line(vect.settled_us_per_row)}")
            cpu["inserting"].append(vect.us_per_row)
            cpu["settled"].append(vect.settled_us_per_row)
            if opts.profile:
                print_profile(path)
    finally:
        vectide.stop()
        ceiling.stop()
    report(rates, cpu)


def add_nice_options(p: argparse.ArgumentParser, default: int) -> None:
    """``--nice NAMES`` (``--nice-value``, ``--alternate``): the experiment that lowers some
    processes' scheduling groups for the rounds (``set_autogroup_nice``)."""
    p.add_argument(
        "--nice",
        default="",
        help="experiment: comma-separated processes (datanode, infra:kafka, ...) whose "
        "scheduler autogroup gets --nice-value, so they take only the CPU the others leave",
    )
    p.add_argument("--nice-value", type=int, default=default)
    p.add_argument("--alternate", action="store_true", help="--nice in even rounds only")


def set_autogroup_nice(pids: list[int], nice: int) -> None:
    """Linux with autogroup scheduling (each session a group): a process's own nice value
    only orders its session's threads, so the experiment sets its group's nice instead
    (``data.nice`` sets both in the data node itself)."""
    for pid in pids:
        group = Path(f"/proc/{pid}/autogroup")
        try:
            group.write_text(str(nice))
            log(f"pid {pid}: {group.read_text().strip()}")
        except OSError as exc:
            log(f"pid {pid}: autogroup nice not set ({exc})")


def insert_seconds(target: VectideTarget, method: str = "Insert") -> float:
    """Seconds the proxy spent inside ``method``'s handlers so far (its latency histogram's
    sum)."""
    url = f"http://{target.config.service.host}:{target.config.service.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("vectide_proxy_request_latency_seconds_sum") and f'"{method}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) of each process with its own children."""
    listed = set(pids.values())
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            tree = own_tree(pid, listed) if name != "client" else [psutil.Process(pid)]
            out[name] = sum(sum(p.cpu_times()[:2]) for p in tree)
        except psutil.Error:
            continue
    return out


def thread_cpu(pid: int, enabled: bool) -> dict[int, float]:
    """CPU seconds of each thread of ``pid`` (Linux ``/proc``), by native thread id."""
    out: dict[int, float] = {}
    if not enabled:
        return out
    ticks = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names by native id, from ``py-spy dump`` (threads Python did not start,
    gRPC's and librdkafka's, keep their kernel name)."""
    names: dict[int, str] = {}
    spy = py_spy()
    if spy is not None:
        dump = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True)
        for match in re.finditer(
            r'^Thread (0x[0-9A-Fa-f]+|\d+) \(\w+\): "([^"]*)"', dump.stdout, re.M
        ):
            ident = match.group(1)
            names[int(ident, 16) if ident.startswith("0x") else int(ident)] = match.group(2)
    for task in Path(f"/proc/{pid}/task").iterdir():
        if int(task.name) not in names:
            try:
                names[int(task.name)] = (task / "comm").read_text().strip()
            except OSError:
                continue
    return names


def log_threads(
    pid: int,
    before: dict[int, float],
    after: dict[int, float],
    rows: int,
    unit: str = "row",
    process: str = "standalone",
) -> None:
    """The standalone's CPU microseconds per row (``unit``) by thread name (same names
    summed)."""
    names = thread_names(pid)
    used: dict[str, float] = {}
    for tid, seconds in after.items():
        name = re.sub(r"[_-]?\d+$", "", names.get(tid, str(tid)))
        used[name] = used.get(name, 0.0) + (seconds - before.get(tid, 0.0)) * 1e6 / rows
    log(f"{process} threads, CPU us/{unit}: {us_line(used)}")


def settle(pids: dict[str, int], timeout_s: float) -> None:
    """Wait until the deployment's processes use under 30 % of one core (the previous
    round's persistence and index builds done), so both systems start from quiet."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pids)
        time.sleep(1.0)
        after = cpu_seconds(pids)
        if sum(after[n] - before[n] for n in after if n in before and n != "client") < 0.3:
            return


def print_profile(path: Path) -> None:
    summary = summarise(path, top=40)
    print(f"profile {path}: {summary.get('samples')} samples")
    for kind in ("self", "inclusive"):
        print(f"  {kind}:")
        for item in summary.get(kind, []):  # type: ignore[union-attr]
            print(f"    {item['share']:6.1%}  {item['function']}")


def report(rates: dict[str, list[float]], cpu: dict[str, list[dict[str, float]]]) -> None:
    ceil, vect = statistics.median(rates["ceiling"]), statistics.median(rates["vectide"])
    each = ", ".join(
        f"{v / c:.0%}" for c, v in zip(rates["ceiling"], rates["vectide"], strict=True)
    )
    print(f"ceiling rows/s: {', '.join(f'{x:,.0f}' for x in rates['ceiling'])}")
    print(f"vectide rows/s: {', '.join(f'{x:,.0f}' for x in rates['vectide'])}")
    print(f"medians: ceiling {ceil:,.0f}, vectide {vect:,.0f}: {vect / ceil:.0%} ({each})")
    for phase, rounds in cpu.items():
        names = sorted({n for r in rounds for n in r})
        med = {n: statistics.median(r.get(n, 0.0) for r in rounds) for n in names}
        print(f"vectide CPU us/row ({phase}, medians): {us_line(med)}")


if __name__ == "__main__":
    main()
