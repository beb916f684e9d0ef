"""A simulated run of the query coordinator's balancer (services/querycoord/balance.py).

Issue 18 asks what spread the memory-based balancer reaches over 10 query nodes and 1,000
sealed segments, and how many moves it needs. This builds that cluster with an unbalanced
start (the segments on a few old nodes, new nodes nearly empty), runs the balancer round by
round, applying each round's moves as the coordinator would (segment memory moves with the
segment), until a round makes no move, and prints the memory use before and after. No
process, network or broker: seconds, any machine.

    python -m benchmarks.balance_sim [--nodes 10] [--segments 1000] [--seed 7] [--replicas 1]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from vectide.services.querycoord.balance import (
    BalanceConfig,
    Balancer,
    NodeState,
    SegmentLoad,
    apply_moves,
    spread,
)

NODE_LIMIT_MB = 32_768.0
#: what a query node uses with no sealed segment (growing data, interim indexes, the process)
NODE_BASE_MB = 1_024.0
#: the first nodes of the cluster, which the start crowds; the rest are "just added"
OLD_NODE_SHARE = 0.6


@dataclass(frozen=True)
class RoundResult:
    moves: int
    moved_mb: float
    spread: float


def segment_sizes(rng: random.Random, count: int) -> list[SegmentLoad]:
    """Sizes spread like real sealed segments: mostly a few hundred MB, some small (sealed
    early by idleness or a Flush), a long tail of large ones."""
    return [
        SegmentLoad(i, round(min(1_024.0, max(8.0, rng.lognormvariate(4.9, 0.8))), 1))
        for i in range(count)
    ]


def unbalanced_start(
    rng: random.Random, node_count: int, segments: Sequence[SegmentLoad], replicas: int
) -> list[NodeState]:
    """Copies land on the old nodes, each weighted differently, while they have room (95 %),
    then anywhere with room: the state of a cluster whose new nodes have just joined."""
    old = max(replicas, round(node_count * OLD_NODE_SHARE))
    weights = [rng.uniform(1.0, 4.0) if i < old else 0.0 for i in range(node_count)]
    used = [NODE_BASE_MB] * node_count
    held: list[dict[int, float]] = [{} for _ in range(node_count)]
    for segment in segments:
        for i in _hosts(rng, weights, used, segment.memory_mb, replicas):
            held[i][segment.segment_id] = segment.memory_mb
            used[i] += segment.memory_mb
    return [NodeState(i + 1, used[i], NODE_LIMIT_MB, held[i]) for i in range(node_count)]


def _hosts(
    rng: random.Random, weights: list[float], used: list[float], size: float, replicas: int
) -> list[int]:
    hosts: list[int] = []
    for _ in range(replicas):
        room = [
            i for i in range(len(used)) if i not in hosts and used[i] + size <= 0.95 * NODE_LIMIT_MB
        ]
        preferred = [i for i in room if weights[i] > 0] or room
        if not preferred:
            raise SystemExit("the segments do not fit in the cluster: fewer segments or more nodes")
        hosts.append(rng.choices(preferred, [weights[i] or 1.0 for i in preferred])[0])
    return hosts


def run_rounds(
    balancer: Balancer, nodes: list[NodeState], max_rounds: int = 20
) -> tuple[list[NodeState], list[RoundResult]]:
    """Plan, apply, repeat until a round makes no move (or ``max_rounds``, a safety net)."""
    rounds: list[RoundResult] = []
    for _ in range(max_rounds):
        moves = balancer.plan(nodes).moves
        if not moves:
            break
        nodes = apply_moves(nodes, moves)
        rounds.append(RoundResult(len(moves), sum(m.memory_mb for m in moves), spread(nodes)))
    return nodes, rounds


def summary(nodes: int = 10, segments: int = 1000, seed: int = 7) -> dict[str, float]:
    """The default simulation's figures, for `make bench`'s report."""
    rng = random.Random(seed)
    start = unbalanced_start(rng, nodes, segment_sizes(rng, segments), 1)
    started = time.perf_counter()
    after, rounds = run_rounds(Balancer(BalanceConfig()), start)
    return {
        "nodes": nodes,
        "segments": segments,
        "spread_before": round(spread(start), 1),
        "spread_after": round(spread(after), 1),
        "rounds": len(rounds),
        "moves": sum(r.moves for r in rounds),
        "moved_gb": round(sum(r.moved_mb for r in rounds) / 1024, 1),
        "seconds": round(time.perf_counter() - started, 2),
    }


def describe(title: str, nodes: Sequence[NodeState]) -> str:
    per_node = "  ".join(f"{n.node_id}:{n.usage_percentage:.1f}" for n in nodes)
    return (
        f"{title}: spread {spread(nodes):.1f} points (max - min usage %); "
        f"segments per node {[len(n.segments) for n in nodes]}\n  usage % by node  {per_node}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-difference", type=float, default=30.0, help="percentage points")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    segments = segment_sizes(rng, args.segments)
    nodes = unbalanced_start(rng, args.nodes, segments, args.replicas)
    config = BalanceConfig(memory_usage_max_difference_percentage=args.max_difference)
    balancer = Balancer(config)
    total_gb = sum(n.memory_used_mb for n in nodes) / 1024
    print(
        f"{args.nodes} query nodes of {NODE_LIMIT_MB / 1024:.0f} GB ({NODE_BASE_MB:.0f} MB base "
        f"each), {args.segments} segments x {args.replicas} replica(s), {total_gb:.1f} GB in "
        f"use; trigger: a node > {config.overloaded_memory_threshold_percentage:.0f} % or a "
        f"spread > {config.memory_usage_max_difference_percentage:.0f} points, a triggered "
        f"round settles at <= {config.settled_difference:.0f}"
    )
    print(describe("before", nodes))
    started = time.perf_counter()
    after, rounds = run_rounds(balancer, nodes)
    elapsed = time.perf_counter() - started
    for i, result in enumerate(rounds, 1):
        print(
            f"round {i}: {result.moves} moves, {result.moved_mb / 1024:.1f} GB moved, "
            f"spread {result.spread:.1f}"
        )
    print(f"round {len(rounds) + 1}: no move")
    print(describe("after", after))
    print(
        f"moves: {sum(r.moves for r in rounds)} "
        f"({sum(r.moved_mb for r in rounds) / 1024:.1f} GB of {total_gb:.1f} GB), "
        f"planning took {elapsed:.2f} s"
    )


if __name__ == "__main__":
    main()
