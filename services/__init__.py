"""Vectide: a Kafka-native vector database re-creating the Milvus 2.x architecture."""

__version__ = "0.1.0"
