// A nullable vector field through the Node SDK, unchanged (Milvus 2.6): rows with and without
// a second vector, a search of it (only rows with a vector are found), a query of it (null
// where there is none). Prints one JSON object of what came back;
// tests/integration/test_node_sdk.py checks it. Any error exits non-zero.
//
//   node nullvec.js 127.0.0.1:19530 <collection name>
'use strict';

const { DataType } = require('@zilliz/milvus2-sdk-node');
const { check, createLoaded, runOnCollection } = require('./check');

runOnCollection(async (client, name) => {
  // row i: vec (i, 0); extra (i, 1) for odd i, null for even ones
  await createLoaded(client, name, {
    fields: [
      { name: 'id', data_type: DataType.Int64, is_primary_key: true, autoID: false },
      { name: 'vec', data_type: DataType.FloatVector, dim: 2 },
      { name: 'extra', data_type: DataType.FloatVector, dim: 2, nullable: true },
    ],
    data: Array.from({ length: 10 }, (_, i) => ({
      id: i,
      vec: [i, 0],
      extra: i % 2 ? [i, 1] : null,
    })),
    indexes: [
      ['vec', 'FLAT', { metric_type: 'L2' }],
      ['extra', 'FLAT', { metric_type: 'L2' }],
    ],
  });
  const near = check(
    'search extra',
    await client.search({
      collection_name: name,
      data: [[3.9, 1]],
      anns_field: 'extra',
      limit: 4,
      output_fields: ['id'],
    }),
  ).results;
  const rows = check(
    'query extra',
    await client.query({ collection_name: name, filter: 'id < 4', output_fields: ['extra'] }),
  ).data;
  return {
    near: near.map((r) => Number(r.id)),
    rows: rows.map((r) => [Number(r.id), r.extra]).sort((a, b) => a[0] - b[0]),
  };
});
