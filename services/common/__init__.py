"""Libraries shared by every role: config, timestamps, metastore, sessions, msgstream, S3."""
