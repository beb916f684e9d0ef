"""Vectide's configuration: one typed tree with documented defaults.

Values come from three layers, later ones winning:

1. the defaults below (a laptop deployment on loopback);
2. a YAML file: ``$VECTIDE_CONFIG``, else ``./vectide.yaml`` if it exists, shaped like the
   tree (``kafka: {bootstrap_servers: "host:9092"}``);
3. environment variables ``VECTIDE_<SECTION>_<FIELD>`` (``VECTIDE_KAFKA_BOOTSTRAP_SERVERS``).

Unknown keys are errors rather than silently ignored, so a typo never runs with a default.
``vectide config`` prints the effective tree.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ENV_PREFIX = "VECTIDE_"
CONFIG_ENV = "VECTIDE_CONFIG"
DEFAULT_CONFIG_FILE = "vectide.yaml"


class ConfigError(ValueError):
    """A configuration value is unknown or cannot be converted to its declared type."""


@dataclass
class ClusterConfig:
    #: Prefix of every topic, ZooKeeper path and S3 root: several clusters can share infra.
    name: str = "vectide"
    #: Number of physical DML channels (Kafka topics ``{name}-dml_{i}``, one partition each).
    dml_channels: int = 16


@dataclass
class KafkaConfig:
    #: Bootstrap servers of the Kafka-protocol broker carrying the channels.
    bootstrap_servers: str = "127.0.0.1:9092"
    #: ``vectide infra up`` starts a local Tansu broker on this address; false = external Kafka.
    managed: bool = True
    #: Storage of the managed broker: ``memory`` (lost on stop) or ``s3`` (on the managed S3).
    storage: str = "memory"
    #: How long a fetch waits for data while it matters (a read waits, data flows). Tansu
    #: answers only when it expires, so a lone write waits out the reader's current fetch
    #: (bench freshness p50 9-11 ms at 20 ms, 4-6 ms at 5 ms). Shorter ran away on a long
    #: log: ~8,000 batches in one channel (~20 minutes of steady ingest) and Tansu's fetches
    #: with data took longer than 5 ms, the broker went to a full core and deliveries to
    #: seconds; 20 ms holds to ~15,000 batches and halves the broker's CPU at a tail
    #: (docs/architecture.md, "Tansu's in-memory log").
    fetch_wait_max_ms: int = 20
    #: Query nodes' fetch wait while their shards are idle (no data, no read for 2 s): an
    #: idle consumer then costs the broker a few fetches a second, not 200. A read or new
    #: data switches back to ``fetch_wait_max_ms`` at once (a second, standby consumer).
    fetch_wait_idle_ms: int = 500
    #: The broker answers a waiting fetch as soon as data arrives (Apache Kafka does; Tansu
    #: does not). Then consumers always wait ``fetch_wait_idle_ms``: a long poll, no switch.
    broker_long_polls: bool = False
    #: librdkafka ``security.protocol`` of every client (PLAINTEXT, SSL, SASL_PLAINTEXT,
    #: SASL_SSL); empty = plaintext. The SASL/SSL keys below are passed only when set.
    security_protocol: str = ""
    #: ``sasl.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = ""
    #: CA bundle file verifying the brokers' certificates (SSL); empty = the system's CAs.
    ssl_ca_location: str = ""


@dataclass
class ZooKeeperConfig:
    #: Connection string of the ZooKeeper ensemble.
    hosts: str = "127.0.0.1:2181"
    #: Root znode; every cluster lives under ``{root}/{cluster.name}``.
    root: str = "/vectide"
    #: Session timeout: how long a dead process keeps its ephemeral nodes (sessions, locks).
    session_timeout_s: float = 10.0
    #: ``vectide infra up`` starts a local ZooKeeper on this address; false = external.
    managed: bool = True
    #: SASL DIGEST-MD5 login of every Vectide ZooKeeper client (the ensemble's JAAS
    #: ``Server`` section lists the user); empty = no SASL. A managed ZooKeeper then requires
    #: SASL from every client (``sessionRequireClientSASLAuth``) and knows this one user.
    sasl_username: str = ""
    sasl_password: str = ""
    #: A file holding the SASL password (a mounted Secret); wins over ``sasl_password``
    #: when set. Surrounding whitespace is stripped.
    sasl_password_file: str = ""
    #: Create Vectide's znodes with an ACL that lets only the SASL user read or change them
    #: (``sasl:<sasl_username>``, all permissions); needs ``sasl_username``. Znodes that
    #: already exist keep their ACL.
    sasl_acl: bool = False

    def sasl_credentials(self) -> tuple[str, str] | None:
        """(user, password) of the SASL login, or None when SASL is off."""
        if not self.sasl_username:
            return None
        if self.sasl_password_file:
            return self.sasl_username, Path(self.sasl_password_file).read_text().strip()
        return self.sasl_username, self.sasl_password


@dataclass
class S3Config:
    #: S3 endpoint URL (path-style addressing is used, so MinIO/SeaweedFS/AWS all work).
    endpoint: str = "http://127.0.0.1:8333"
    access_key: str = "vectide"
    secret_key: str = "vectide-secret"
    region: str = "us-east-1"
    #: Bucket holding binlogs and index files; created on first use.
    bucket: str = "vectide"
    #: Key prefix inside the bucket (Milvus's ``rootPath``).
    root_path: str = "files"
    #: ``vectide infra up`` starts a local SeaweedFS S3 on this endpoint; false = external.
    managed: bool = True


@dataclass
class InfraConfig:
    #: Where ``vectide infra`` keeps PID files, logs and the data of the managed services.
    run_dir: str = ".vectide"
    #: How long ``vectide infra up`` waits for each service to answer its health check.
    startup_timeout_s: float = 60.0
    #: Internal ports of the managed SeaweedFS (gRPC ports are these + 10000).
    seaweed_master_port: int = 9333
    seaweed_volume_port: int = 8380
    seaweed_filer_port: int = 8888
    #: Heap of the managed ZooKeeper JVM.
    zookeeper_heap_mb: int = 256
    #: Whether the managed ZooKeeper fsyncs every transaction (its ``forceSync``). Off, a
    #: crash of the machine (not of ZooKeeper) may lose its last writes, as the managed
    #: broker (Tansu's memory storage) loses its log on any restart anyway; on a shared disk
    #: an fsync took up to 1.5 s here, and requests queue behind it. A production
    #: ZooKeeper (the Helm chart's or an external one) is configured apart.
    zookeeper_fsync: bool = True
    #: Cluster mode (``vectide up --mode cluster``) runs a Spark standalone master and
    #: workers for the data node (from pyspark's own jars); its ports and sizes:
    spark_master_port: int = 7077
    spark_master_webui_port: int = 8080
    spark_workers: int = 1
    #: worker i listens on this port + i and serves its UI on spark_worker_webui_port + i
    spark_worker_port: int = 7078
    spark_worker_webui_port: int = 8081
    spark_worker_cores: int = 2
    spark_worker_memory_mb: int = 2048


@dataclass
class SupervisorConfig:
    """The supervisor ``vectide up`` leaves running, which restarts roles that exit."""

    #: false = ``vectide up`` starts the roles unsupervised (nothing restarts them).
    enabled: bool = True
    #: Wait before restarting a role that exited; doubled (``backoff_multiplier``) for each
    #: further exit in a row, at most ``backoff_max_s``.
    backoff_initial_s: float = 0.5
    backoff_multiplier: float = 2.0
    backoff_max_s: float = 30.0
    #: A role that ran this long before exiting counts as stable: its next restart waits
    #: ``backoff_initial_s`` again.
    stable_after_s: float = 60.0
    #: How often the supervisor checks its roles.
    poll_interval_s: float = 0.2


@dataclass
class TimeConfig:
    #: Period of proxy timetick reports and of rootcoord's TimeTick broadcast (Milvus: 200 ms)
    #: while anything is written or read with a wait (and for one idle period after); in that
    #: time only channels that need a tick get one (written, asked for, quiet for
    #: ``idle_broadcast_interval_ms``). Finished writes tick at once whatever the period
    #: (reads carry fences, docs/architecture.md); a tick is a record that every consumer of
    #: its channel reads (in a 20-minute soak at 1,000 rows/s, 50 ms cost 6-17 points of a
    #: core more, and Tansu's slow fetches on long topics came 5-10 minutes sooner).
    timetick_interval_ms: int = 200
    #: Longest period of the proxies' reports once nothing happens: they back off to it. Keep
    #: it well below ``query.graceful_time_ms``: a Bounded read carries the fences of its
    #: proxy's last report, which reach back that far. Equal to ``timetick_interval_ms``: no
    #: back-off.
    idle_timetick_interval_ms: int = 1000
    #: Longest period of the rootcoord's TimeTick broadcast once nothing happens (a record in
    #: every channel each time). Proxies still report every ``idle_timetick_interval_ms``
    #: (no record), and no read waits for an idle tick: Strong, Bounded and Session reads
    #: carry fences. While active, also the longest a channel goes without a tick. Idle ticks
    #: move the data node's checkpoints and the query nodes' tsafe (and its lag metric);
    #: on Tansu, whose fetches slow down as a topic grows, every record counts.
    idle_broadcast_interval_ms: int = 10000
    #: TSO: how far ahead of the clock the persisted upper bound is set.
    tso_window_ms: int = 3000
    #: TSO: how often physical time advances.
    tso_update_interval_ms: int = 50


@dataclass
class QueryConfig:
    #: Bounded consistency reads at ``now - graceful_time_ms`` (Milvus's gracefulTime).
    graceful_time_ms: int = 5000
    #: Longest a read waits for its guarantee timestamp before failing (a stalled channel).
    max_timestamp_lag_ms: int = 10_000
    #: Concurrent reads a proxy runs (the dq queue's width).
    max_concurrent_reads: int = 16
    #: Query nodes build an interim faiss index and the scalar indexes per full chunk of this
    #: many growing rows; the rest is searched and filtered by a scan.
    index_chunk_rows: int = 16_384
    #: The interim index of a growing chunk (Milvus's queryNode.segcore.interimIndex):
    #: ``IVF_FLAT`` whatever the collection's index (quick to build: a sample trains the
    #: lists), or ``collection``: the collection's own type (HNSW M=16 costs ~40x the CPU:
    #: 2.3-3.5 s a 16k x 128-d chunk). FLAT, binary and sparse vectors get none (exact).
    interim_index: str = "IVF_FLAT"
    #: Lists of an IVF_FLAT interim index (at most a chunk's rows / 39).
    interim_nlist: int = 128
    #: Lists an interim IVF_FLAT search probes; an IVF_FLAT collection's larger ``nprobe``
    #: wins.
    interim_nprobe: int = 16
    #: Interim IVF_FLAT blocks merge as chunks accumulate: this many neighbouring blocks of one
    #: level become one of the next (16k -> 64k -> 256k -> 1M rows), with twice the lists per
    #: level and twice the probes every third, built off the search path (a search costs a
    #: faiss call per block: 1M growing rows were 61 of them). 0 or 1: one index per chunk.
    interim_merge_fanout: int = 4
    #: Memory-based balancing of sealed segments over query nodes (the seeds' design, Milvus's
    #: queryCoord keys of the same names): services/querycoord/balance.py decides the moves,
    #: services/querycoord/distribution.py makes them. How often the coordinator reads every
    #: node's memory use and balances (Milvus's balanceIntervalSeconds).
    balance_interval_s: float = 60.0
    #: A query node's memory limit, in MB, against which its use is a percentage; 0 = the
    #: node's cgroup limit, else the machine's memory.
    memory_limit_mb: int = 0
    #: A node using more than this percentage of its limit triggers a rebalance; no move may
    #: take a destination above it.
    overloaded_memory_threshold_percentage: float = 90.0
    #: Two nodes' usage percentages differing by more than this triggers a rebalance.
    memory_usage_max_difference_percentage: float = 30.0
    #: A query node stopped gracefully (SIGTERM) waits up to this long for the coordinator
    #: to move its shards and segments to other nodes before it exits (Milvus's
    #: queryNode.gracefulStopTimeout); a node that is the last one exits at once.
    graceful_stop_timeout_s: float = 30.0


@dataclass
class DataConfig:
    #: A growing segment is sealed once this many rows were assigned to it (Milvus seals by
    #: size; 500k rows of 128-d float vectors is ~250 MB).
    segment_max_rows: int = 500_000
    #: ... or once nothing was written to it for this long.
    segment_idle_seal_s: float = 600.0
    #: The data node's Spark master: ``local[N]`` runs Spark inside the data node process
    #: (standalone mode); ``spark://host:port`` or ``k8s://https://...`` submits to a cluster.
    #: ``vectide up --mode cluster`` points it at the Spark master it starts.
    spark_master: str = "local[2]"
    #: Micro-batch trigger of the data node's streaming query: rows are persisted this
    #: often while they arrive (a Flush runs a batch at once whatever this says; the channel
    #: holds every row meanwhile, so nothing waits on it but the S3 copy). Each batch costs
    #: ~0.2 s of CPU in Spark and the driver whatever its size: at 1,000 rows/s the data node
    #: used 24-25 % of a core at 1 s and 8-9 % at 3 s (``benchmarks/soak``, 3 minutes each,
    #: freshness and Strong reads unchanged). Milvus syncs a growing segment far less often.
    trigger_s: float = 3.0
    #: Nice value (0-19) of the data node process and its scheduling group (Spark's JVM
    #: included), like ``service.background_nice``. Not lowered by default: persistence
    #: that yields falls behind ingest on a busy shared box, and rows not yet flushed stay
    #: in the query nodes' memory. Measured here (``benchmarks/insert_rate --nice``, 100k
    #: rows): at 19, pymilvus inserts 52.9-57.4k against 40.0-52.7k rows/s at 0; with a
    #: FLAT and an IVF_FLAT collection filled first (``fresh_rate --like-bench``), a flush
    #: right after the inserts took 9-11 s at 10 against 0.5-1 s at 0.
    nice: int = 0
    #: Port of the data node driver's Spark UI and monitoring REST API (/api/v1); 0 = off.
    spark_ui_port: int = 4040
    #: Cores the data node takes from a Spark cluster (0: every core offered).
    spark_max_cores: int = 0
    #: Memory of each Spark executor.
    spark_executor_memory_mb: int = 1024
    #: A micro-batch takes at most this many records of one channel (a backlog is worked
    #: off in several batches; an executor task holds one channel's range in memory).
    max_records_per_channel: int = 2000
    #: The data node's driver cuts batches at the ticks the rootcoord lists in the tick-index
    #: topic (``{cluster}-tickindex``) instead of reading every record of the channels; false
    #: makes it read the channels (as it does anyway while the index is missing or silent).
    tick_index: bool = True
    #: With only timeticks arriving, the data node moves its channel checkpoints this often
    #: (a Spark batch each time). A flush or a seal runs a batch at once whatever this says;
    #: a restarted query node replays at most this much of an idle channel.
    idle_checkpoint_s: float = 30.0
    #: Automatic compaction: every ``compaction_interval_s`` datacoord plans merges of small
    #: flushed segments of a shard and rewrites of segments with many deletes (docs/compaction.md).
    compaction_enabled: bool = True
    compaction_interval_s: float = 60.0
    #: Automatic merges take segments below this share of ``segment_max_rows`` (Milvus: 0.5).
    compaction_small_fraction: float = 0.5
    #: A segment is rewritten without its deleted rows once deletes may reach this share.
    compaction_delete_ratio: float = 0.2
    #: A compaction plan with no result after this long is given up (state Timeout).
    compaction_timeout_s: float = 600.0
    #: Finished compaction jobs keep their metastore record (GetCompactionState answers for
    #: them, also after a coordinator restart) this long; the newest 1,000 at most.
    compaction_job_retention_s: float = 3600.0
    #: Garbage collection: every ``gc_interval_s`` the coordinator removes S3 objects (binlogs,
    #: deltalogs, stats logs, index files) and segment records nothing live needs.
    gc_enabled: bool = True
    gc_interval_s: float = 60.0
    #: Safety delay: a dropped or compacted segment's files stay this long after it was retired
    #: (and while a query node still serves it); unrecorded objects are kept until this old.
    gc_delay_s: float = 3600.0
    #: Time travel: reads may ask for any snapshot of the last ``retention_s`` seconds
    #: (``consistency_level="Customized"`` with ``guarantee_timestamp``, or the requests'
    #: ``travel_timestamp``); compaction then keeps rows deleted within it, which costs query
    #: node memory and S3 for that long (docs/time_travel.md). 0 = off, as Milvus 2.2's
    #: ``common.retentionDuration``: a churning collection then shrinks back at once.
    retention_s: float = 0.0


@dataclass
class IngestConfig:
    #: Records applied through the proxy in one write, at most (per mapping).
    batch_rows: int = 5000
    #: How long a partial batch waits for more records before it is written.
    linger_ms: int = 50
    #: How often running workers re-read the mappings; adds and removes also reach them at
    #: once through a metastore watch, so this only bounds how late an edit is seen.
    refresh_s: float = 2.0
    #: Consumer-group timeouts. Short ones make rebalances quick on the local broker; on a
    #: production Kafka cluster Kafka's defaults (45000 / 3000 / 300000) are the usual choice.
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000
    max_poll_interval_ms: int = 10_000
    #: Longest pause between retries while the proxy pushes back.
    retry_backoff_max_s: float = 5.0
    #: Fetch wait of the ingest consumers: the first record after a quiet spell waits this
    #: long at most on brokers that do not long-poll (Tansu); Kafka answers when data comes.
    fetch_wait_max_ms: int = 25


@dataclass
class ServiceConfig:
    #: Host the Vectide services bind and advertise.
    host: str = "127.0.0.1"
    #: Milvus gRPC port of the first proxy (further proxies take the next ports).
    proxy_port: int = 19530
    #: Milvus RESTful API v2 (``/v2/vectordb/...``) port of the first proxy; further proxies
    #: take the next ports. Milvus serves REST on its gRPC port too, which grpcio cannot, so
    #: it has its own port here (Milvus's ``proxy.http.port``). 0 turns REST off.
    http_port: int = 19121
    #: Internal gRPC port of the rootcoord (querycoord is served on the same port).
    rootcoord_port: int = 19600
    #: First internal gRPC port of the query nodes (node i takes this + i).
    querynode_port: int = 19610
    #: Longest a proxy waits for a timestamp, ids or a segment from the coordinator (cluster
    #: mode): a stalled or failing-over rootcoord then fails reads and writes with a retriable
    #: SERVICE_UNAVAILABLE instead of hanging them; 0 = wait through failovers (up to 30 s).
    coordinator_fail_fast_s: float = 3.0
    #: Shards of a new collection when the client does not say (Milvus's default).
    default_shards: int = 1
    #: HTTP port of ``/metrics`` and ``/healthz`` (Milvus's 9091). Standalone and every
    #: ``vectide run ROLE`` use it unless ``--metrics-port`` says otherwise; ``vectide up
    #: --mode cluster`` gives each local role its own (see services/infra/deployment.py).
    metrics_port: int = 9091
    #: How long a thread of a Vectide server may hold Python's GIL while another waits for it
    #: (``sys.setswitchinterval``; Python's default is 5 ms). A request woken by the broker's
    #: ack needs the GIL twice (the delivery callback, then the handler); with a busy thread
    #: in the process (a shard applying inserts, a search) each took up to 5 ms: a 512 KB
    #: insert message's acknowledged write measured 12.1 ms against 2.8 ms quiet, and 6.0 ms
    #: at 1 ms. 0 keeps Python's default.
    gil_switch_interval_ms: float = 1.0
    #: Nice value (0-19) of the sealed segments' index builds (the coordinator's builder,
    #: on every core for minutes at 1M rows). Serving (requests, timeticks, applying
    #: inserts) keeps 0, so where roles share cores a build takes what serving leaves
    #: instead of slowing it, and still runs at full speed on idle cores; a sealed segment
    #: is searched through an interim stand-in meanwhile. 0 = no lowering. Linux only
    #: (services/common/priority.py); on Kubernetes pods' CPU requests divide the cores.
    #: The query nodes' interim indexes are not lowered: they are how growing rows are
    #: searched (lowered, in alternating runs of ``fresh_rate --like-bench --no-datanode``:
    #: inserts 51.6k against 49.2k rows/s, searches right after them 386 against 438/s,
    #: medians of 4). The data node's own value is ``data.nice``.
    background_nice: int = 10
    #: Address the servers listen on; empty = ``host``. Pods listen on 0.0.0.0 (probes,
    #: ``kubectl port-forward``) and advertise their pod IP as ``host``.
    bind_host: str = ""

    def listen_address(self, address: str) -> str:
        """``address`` (advertised ``host:port``) with the host this process binds."""
        return f"{self.bind_host}:{address.rsplit(':', 1)[1]}" if self.bind_host else address


@dataclass
class SecurityConfig:
    """Authentication and RBAC of the Milvus API (Milvus's ``common.security`` keys)."""

    #: Every Milvus RPC needs valid credentials (pymilvus ``token="user:password"`` or
    #: ``user=``/``password=``) and the caller's roles must grant the RPC's privilege.
    authorization_enabled: bool = False
    #: The root user's initial password, used once: when the cluster's metastore has no root
    #: yet. Change it afterwards with ``update_password`` (Milvus's default is ``Milvus``).
    root_password: str = "Milvus"
    #: A file holding the initial root password (a mounted Secret); wins over
    #: ``root_password`` when set. Surrounding whitespace is stripped.
    root_password_file: str = ""
    #: How long a proxy trusts a verified ``user:password`` without hashing it again. Changes
    #: to users, roles and grants clear every proxy's cache at once (a metastore watch), so
    #: this only bounds how long a lost watch could keep a stale answer.
    credential_cache_ttl_s: float = 30.0
    #: The audit log (DDL and permission changes: who, what, when) goes to this file, one
    #: ``key=value`` line per event; empty = the process log (stderr), logger ``vectide.audit``.
    audit_log_file: str = ""
    #: TLS on the proxy's client ports, gRPC and REST (Milvus's ``common.security.tlsMode``):
    #: 0 off, 1 one-way (the server shows ``tls_cert_file``), 2 mutual (clients must also
    #: show a certificate signed by ``tls_ca_file``).
    tls_mode: int = 0
    #: PEM certificate (chain) the servers present, and its private key.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: PEM CA that signs client certificates (mode 2), and that Vectide's own clients (the
    #: readiness probe, ``vectide status``, internal RPCs) trust for the servers' certificates.
    tls_ca_file: str = ""
    #: The name Vectide's own clients expect in the servers' certificate; empty = the host
    #: they dial (an IP address must then be in the certificate's subjectAltName).
    tls_server_name: str = ""
    #: Mutual TLS on the internal RPC ports between roles (cluster mode) with the same
    #: certificate, key and CA: every role presents ``tls_cert_file`` and verifies its peer.
    internal_tls: bool = False

    def initial_root_password(self) -> str:
        """The password root starts with: the secret file's content, else ``root_password``."""
        if self.root_password_file:
            return Path(self.root_password_file).read_text().strip()
        return self.root_password


@dataclass
class QuotaConfig:
    """Resource limits of the Milvus API and per-user rate limits (Milvus's
    ``quotaAndLimits`` and ``proxy`` keys); a request over a limit fails with a Milvus
    status naming the key."""

    #: Largest ``limit`` (+ ``offset``) of a search (``quotaAndLimits.limits.topK``).
    max_topk: int = 16384
    #: Most query vectors in one search (``quotaAndLimits.limits.nq``).
    max_nq: int = 16384
    #: Largest dimension of a vector field (``proxy.maxDimension``).
    max_dim: int = 32768
    #: Longest filter expression, in characters (Milvus bounds it by the request size only;
    #: a bound here keeps the parser's work per request small).
    max_expr_length: int = 65536
    #: Deepest nesting of a filter expression (brackets, ``not``, arithmetic): deeper ones
    #: are refused before they reach a query node's recursive evaluator.
    max_expr_depth: int = 32
    #: Most collections in the cluster (``quotaAndLimits.limits.maxCollectionNum``).
    max_collections: int = 65536
    #: Per-user rate limits on (``quotaAndLimits.enabled``); off by default. The rates below
    #: are cluster-wide, as Milvus's: each proxy enforces ``rate / live proxies`` (counted
    #: from the proxies' sessions). Each user (or ``anonymous`` while authorization is off)
    #: gets its own token bucket per kind on each proxy, refilled at that share and holding
    #: one second's worth; 0 = no limit for that kind.
    rate_limit_enabled: bool = False
    #: Insert, upsert and delete request bytes per second (``quotaAndLimits.dml.insertRate``
    #: is in MB/s too).
    dml_rate_mb: float = 0.0
    #: Search query vectors per second (``quotaAndLimits.dql.searchRate``, in vps).
    search_rate_vps: float = 0.0
    #: Query requests per second (``quotaAndLimits.dql.queryRate``, in qps).
    query_rate_qps: float = 0.0


@dataclass
class Config:
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    zookeeper: ZooKeeperConfig = field(default_factory=ZooKeeperConfig)
    s3: S3Config = field(default_factory=S3Config)
    infra: InfraConfig = field(default_factory=InfraConfig)
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
    time: TimeConfig = field(default_factory=TimeConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    data: DataConfig = field(default_factory=DataConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    quota: QuotaConfig = field(default_factory=QuotaConfig)

    @property
    def run_dir(self) -> Path:
        return Path(self.infra.run_dir).expanduser().resolve()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    def to_env(self) -> dict[str, str]:
        """``VECTIDE_*`` variables that reproduce this config in a child process."""
        return {
            f"{ENV_PREFIX}{section.upper()}_{key.upper()}": str(value)
            for section, values in self.to_dict().items()
            for key, value in values.items()
        }


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Build the effective configuration from defaults, the YAML file and the environment."""
    env = os.environ if env is None else env
    config = Config()
    yaml_path = _yaml_path(path, env)
    if yaml_path is not None:
        apply_overrides(config, _read_yaml(yaml_path), source=str(yaml_path))
    apply_overrides(config, _env_overrides(env), source="environment")
    return config


def apply_overrides(config: Config, values: Mapping[str, Any], source: str = "overrides") -> None:
    """Set ``{section: {field: value}}`` on ``config``, converting each value to its type."""
    for section_name, section_values in values.items():
        section = getattr(config, section_name, None)
        if section is None or not dataclasses.is_dataclass(section):
            raise ConfigError(f"{source}: unknown config section {section_name!r}")
        if not isinstance(section_values, Mapping):
            raise ConfigError(f"{source}: section {section_name!r} must be a mapping")
        hints = typing.get_type_hints(type(section))
        for key, raw in section_values.items():
            if key not in hints:
                raise ConfigError(f"{source}: unknown config key {section_name}.{key}")
            setattr(section, key, _convert(raw, hints[key], f"{section_name}.{key}", source))


def _yaml_path(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    if path is not None:
        return Path(path)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.exists() else None


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    sections = {f.name for f in dataclasses.fields(Config)}
    found: dict[str, dict[str, str]] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV:
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        section, _, key = rest.partition("_")
        if section in sections and key:
            found.setdefault(section, {})[key] = value
    return found


def _convert(raw: Any, typ: Any, key: str, source: str) -> Any:
    if isinstance(typ, types.UnionType):
        typ = next(t for t in typ.__args__ if t is not type(None))
    try:
        if typ is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ValueError(f"not a boolean: {raw!r}")
        return typ(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {key}={raw!r} is not a valid {typ.__name__}") from exc
