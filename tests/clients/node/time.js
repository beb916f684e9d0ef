// A TIMESTAMPTZ field through the Node SDK, unchanged: a collection in Asia/Shanghai's time
// zone, ISO 8601 rows with and without offsets, a query and a search filtered with ISO and
// INTERVAL comparisons, the instants back as text in the collection's zone. Prints one JSON
// object of what came back; tests/integration/test_node_sdk.py checks it. Any error exits
// non-zero.
//
//   node time.js 127.0.0.1:19530 <collection name>
'use strict';

const { DataType } = require('@zilliz/milvus2-sdk-node');
const { check, createLoaded, runOnCollection } = require('./check');

runOnCollection(async (client, name) => {
  // day i of January 2025 at 08:00 in Shanghai: naive text for even ids, UTC for odd ones
  await createLoaded(client, name, {
    fields: [
      { name: 'id', data_type: DataType.Int64, is_primary_key: true, autoID: false },
      { name: 'vec', data_type: DataType.FloatVector, dim: 2 },
      { name: 'at', data_type: DataType.Timestamptz, nullable: true },
    ],
    properties: { timezone: 'Asia/Shanghai' },
    data: Array.from({ length: 10 }, (_, i) => ({
      id: i,
      vec: [i, 0],
      at:
        i === 9
          ? null
          : i % 2
            ? `2025-01-${String(i + 1).padStart(2, '0')}T00:00:00Z`
            : `2025-01-${String(i + 1).padStart(2, '0')} 08:00:00`,
    })),
    indexes: [['vec', 'FLAT', { metric_type: 'L2' }]],
  });
  const week = check(
    'query week',
    await client.query({
      collection_name: name,
      filter: "at >= ISO '2025-01-03 00:00:00' and at < ISO '2025-01-06T00:00:00+08:00'",
      output_fields: ['id', 'at'],
    }),
  ).data;
  const shifted = check(
    'search shifted',
    await client.search({
      collection_name: name,
      data: [[0, 0]],
      limit: 3,
      filter: "at + INTERVAL 'P1M' > ISO '2025-02-07T00:00:00Z'",
      output_fields: ['id', 'at'],
    }),
  ).results;
  const nulls = check(
    'query null',
    await client.query({ collection_name: name, filter: 'at is null', output_fields: ['at'] }),
  ).data;
  return {
    week: week.map((r) => [Number(r.id), r.at]).sort((a, b) => a[0] - b[0]),
    shifted: shifted.map((r) => [Number(r.id), r.at]),
    nulls: nulls.map((r) => [Number(r.id), r.at]),
  };
});
