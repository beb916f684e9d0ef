"""Proxy: the Milvus gRPC front door. Validates requests, stamps writes with the TSO, hashes
rows to shards, reports per-channel progress for the timeticks, and fans reads out to the
query nodes."""
