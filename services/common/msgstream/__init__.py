"""The channel layer: typed messages, their Avro wire format, Kafka producers/consumers and
timetick-aligned consumption (MsgPacks)."""
