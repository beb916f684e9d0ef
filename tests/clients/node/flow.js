// The Node SDK's documented flow against a running Vectide, as a new user writes it:
// create a collection, insert, create an index, load, search (output fields naming the
// primary key, and the SDK's default `*`), query, both ordered by fields, query aggregations,
// delete, drop. Prints one JSON object of
// what came back; tests/integration/test_node_sdk.py checks it. Any error exits non-zero.
//
//   node flow.js 127.0.0.1:19530 <collection name prefix>
'use strict';

const { MilvusClient, DataType, MetricType } = require('@zilliz/milvus2-sdk-node');
const { check } = require('./check');

const DIM = 8;
const ROWS = 50;

/** Deterministic vectors (the test recomputes them in Python). */
function vector(i) {
  return Array.from({ length: DIM }, (_, d) => Math.sin(i * 7 + d));
}

/** One collection's run: pk of `pkType` ('Int64' or 'VarChar'). */
async function run(client, name, pkType) {
  const pk = (i) => (pkType === 'VarChar' ? `k${i}` : i);
  check(
    'createCollection',
    await client.createCollection({
      collection_name: name,
      fields: [
        pkType === 'VarChar'
          ? { name: 'pk', data_type: DataType.VarChar, is_primary_key: true, max_length: 16 }
          : { name: 'pk', data_type: DataType.Int64, is_primary_key: true, autoID: false },
        { name: 'vec', data_type: DataType.FloatVector, dim: DIM },
        { name: 'title', data_type: DataType.VarChar, max_length: 64 },
        { name: 'n', data_type: DataType.Int64 },
      ],
      enable_dynamic_field: true,
      consistency_level: 'Strong',
    }),
  );
  const data = Array.from({ length: ROWS }, (_, i) => ({
    pk: pk(i),
    vec: vector(i),
    title: `title-${i}`,
    n: i,
    color: i % 2 ? 'odd' : 'even',
  }));
  const inserted = check('insert', await client.insert({ collection_name: name, data }));
  check(
    'createIndex',
    await client.createIndex({
      collection_name: name,
      field_name: 'vec',
      index_type: 'FLAT',
      metric_type: MetricType.L2,
    }),
  );
  check('loadCollectionSync', await client.loadCollectionSync({ collection_name: name }));

  const search = check(
    'search',
    await client.search({
      collection_name: name,
      data: [vector(3)],
      limit: 5,
      output_fields: ['pk', 'title', 'color'],
      consistency_level: 'Strong',
    }),
  );
  // no output_fields: the SDK asks for `*`, the request that crashed inside it before
  const searchAll = check(
    'search *',
    await client.search({ collection_name: name, data: [vector(10)], limit: 3 }),
  );
  const query = check(
    'query',
    await client.query({
      collection_name: name,
      filter: 'n < 5',
      output_fields: ['pk', 'title', 'n'],
      consistency_level: 'Strong',
    }),
  );
  // ORDER BY: a query by a dynamic key then the title (descending), a search by n
  const ordered = check(
    'query order_by',
    await client.query({
      collection_name: name,
      filter: 'n < 12',
      output_fields: ['n'],
      limit: 5,
      offset: 2,
      order_by_fields: [{ field: 'color' }, { field: 'title', order: 'desc' }],
      consistency_level: 'Strong',
    }),
  );
  const searchOrdered = check(
    'search order_by',
    await client.search({
      collection_name: name,
      data: [vector(3)],
      limit: 5,
      output_fields: ['n'],
      order_by_fields: 'n:desc',
      consistency_level: 'Strong',
    }),
  );
  // Milvus 3.0's query aggregation: rows grouped by n, and a whole-collection aggregate
  const grouped = check(
    'query group_by_fields',
    await client.query({
      collection_name: name,
      filter: 'n < 3',
      group_by_fields: ['n'],
      output_fields: ['n', 'count(*)', 'max(title)'],
      consistency_level: 'Strong',
    }),
  );
  const aggregated = check(
    'query aggregates',
    await client.query({
      collection_name: name,
      filter: 'n < 12',
      output_fields: ['count(*)', 'sum(n)', 'max(title)'],
      consistency_level: 'Strong',
    }),
  );
  const deleted = check(
    'delete',
    await client.delete({ collection_name: name, filter: 'n < 10' }),
  );
  const count = check(
    'count',
    await client.query({
      collection_name: name,
      filter: '',
      output_fields: ['count(*)'],
      consistency_level: 'Strong',
    }),
  );
  check('dropCollection', await client.dropCollection({ collection_name: name }));
  const has = check('hasCollection', await client.hasCollection({ collection_name: name }));
  return {
    insert_count: Number(inserted.insert_cnt),
    search: search.results,
    search_all: searchAll.results,
    query: query.data,
    query_ordered: ordered.data.map((r) => Number(r.n)),
    search_ordered: searchOrdered.results.map((h) => Number(h.n)),
    grouped: grouped.data.map((r) => [Number(r.n), Number(r['count(*)']), r['max(title)']]),
    aggregated: aggregated.data.map((r) => [
      Number(r['count(*)']),
      Number(r['sum(n)']),
      r['max(title)'],
    ]),
    delete_count: Number(deleted.delete_cnt),
    count_after_delete: Number(count.data[0]['count(*)']),
    exists_after_drop: has.value,
  };
}

async function main() {
  const [address, prefix] = process.argv.slice(2);
  const client = new MilvusClient({ address, timeout: 20000 });
  await client.connectPromise;
  const out = {};
  for (const pkType of ['Int64', 'VarChar']) {
    out[pkType] = await run(client, `${prefix}_${pkType.toLowerCase()}`, pkType);
  }
  await client.closeConnection();
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
