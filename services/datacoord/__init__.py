"""Data coordinator: segment allocation and states, binlog records, channel checkpoints."""
