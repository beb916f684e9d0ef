"""Index node: builds a faiss index file per flushed segment on S3 (Milvus's index builds)."""
