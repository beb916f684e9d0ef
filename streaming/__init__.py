"""The data node: a Spark Structured Streaming job that persists the channels as binlog
segments on S3 (``job.py``), over a Kafka source of its own (``source.py``); the batch logic
itself (``flush.py``) is plain Python."""
