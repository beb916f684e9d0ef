"""Local infrastructure for development and tests: ZooKeeper, a Kafka-protocol broker (Tansu)
and S3 (SeaweedFS), started and stopped by ``vectide infra`` with PID files and logs under one
run directory."""
