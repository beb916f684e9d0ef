"""Query node: consumes shard channels into growing segments, serves search and query at a
snapshot no older than each request's guarantee timestamp."""
