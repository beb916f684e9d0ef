// A GEOMETRY field through the Node SDK, unchanged: create a collection with one and an
// RTREE index, insert WKT, query and search with ST_* filters and RANDOM_SAMPLE. Prints one
// JSON object of what came back; tests/integration/test_node_sdk.py checks it. Any error
// exits non-zero.
//
//   node geo.js 127.0.0.1:19530 <collection name>
'use strict';

const { DataType } = require('@zilliz/milvus2-sdk-node');
const { check, createLoaded, runOnCollection } = require('./check');

runOnCollection(async (client, name) => {
  await createLoaded(client, name, {
    fields: [
      { name: 'id', data_type: DataType.Int64, is_primary_key: true, autoID: false },
      { name: 'vec', data_type: DataType.FloatVector, dim: 2 },
      { name: 'place', data_type: DataType.Geometry, nullable: true },
    ],
    data: Array.from({ length: 40 }, (_, i) => ({
      id: i,
      vec: [i, 0],
      place: i === 39 ? null : `POINT(${i % 10}  ${Math.floor(i / 10)})`,
    })),
    indexes: [
      ['vec', 'FLAT', { metric_type: 'L2' }],
      ['place', 'RTREE', {}],
    ],
  });
  const region = "POLYGON ((1.5 0.5, 3.5 0.5, 3.5 2.5, 1.5 2.5, 1.5 0.5))";
  const within = check(
    'query within',
    await client.query({
      collection_name: name,
      filter: `ST_WITHIN(place, '${region}')`,
      output_fields: ['id', 'place'],
    }),
  ).data;
  const sample = check(
    'query sample',
    await client.query({
      collection_name: name,
      filter: 'id < 20 and RANDOM_SAMPLE(0.5)',
      output_fields: ['id'],
    }),
  ).data;
  const near = check(
    'search near',
    await client.search({
      collection_name: name,
      data: [[0, 0]],
      limit: 5,
      filter: "ST_DWITHIN(place, 'POINT (0 0)', 120000)",
      output_fields: ['id', 'place'], // the SDK's hits hold only the fields asked for
    }),
  ).results;
  const nulls = check(
    'query null',
    await client.query({ collection_name: name, filter: 'place is null', output_fields: ['place'] }),
  ).data;
  return {
    within: within.map((r) => [Number(r.id), r.place]).sort((a, b) => a[0] - b[0]),
    sample: sample.map((r) => Number(r.id)),
    near: near.map((r) => [Number(r.id), r.place]),
    nulls: nulls.map((r) => [Number(r.id), r.place]),
  };
});
