// What Attu does through the Node SDK when it connects and lists a database: connect, check
// health, use a database, list databases and collections (all, and the loaded ones),
// describe each collection with its statistics, load state, index, aliases and replicas,
// and read the system topology; then two more of the SDK's reads (batchDescribeCollections,
// getIndexStatistics). Prints one JSON object of what came back;
// tests/integration/test_node_sdk.py checks it. Any error exits non-zero.
//
//   node attu_connect.js 127.0.0.1:19530 <database name>
'use strict';

const { MilvusClient, ShowCollectionsType } = require('@zilliz/milvus2-sdk-node');
const { check } = require('./check');

/** GetMetrics' JSON, whether or not this SDK version parsed it already. */
function topology(response) {
  return typeof response === 'string' ? JSON.parse(response) : response;
}

async function main() {
  const [address, db] = process.argv.slice(2);
  const setup = new MilvusClient({ address, timeout: 20000 });
  await setup.connectPromise;
  check('createDatabase', await setup.createDatabase({ db_name: db }));
  const client = new MilvusClient({ address, timeout: 20000 });
  await client.connectPromise;
  const health = await client.checkHealth();
  await client.use({ db_name: db });
  const databases = check('listDatabases', await client.listDatabases()).db_names;
  const collection = { collection_name: 'docs' };
  check('createCollection', await client.createCollection({ ...collection, dimension: 4 }));
  check('createAlias', await client.createAlias({ ...collection, alias: 'live' }));
  const all = check('showCollections', await client.showCollections()).data;
  const loaded = check(
    'showCollections loaded',
    await client.showCollections({ type: ShowCollectionsType.Loaded }),
  ).data;
  const described = check('describeCollection', await client.describeCollection(collection));
  const stats = check('getCollectionStatistics', await client.getCollectionStatistics(collection));
  const state = check('getLoadState', await client.getLoadState(collection));
  const index = check('describeIndex', await client.describeIndex(collection));
  const aliases = check('listAliases', await client.listAliases(collection));
  const replicas = check(
    'getReplicas',
    await client.getReplicas({ collectionID: described.collectionID }),
  );
  const batch = check(
    'batchDescribeCollections',
    await client.batchDescribeCollections({ collection_names: ['docs', 'ghost'] }),
  );
  const indexStats = check(
    'getIndexStatistics',
    await client.getIndexStatistics({ collection_name: 'docs', index_name: '' }),
  );
  const metrics = check(
    'getMetric',
    await client.getMetric({ request: { metric_type: 'system_info' } }),
  );
  const result = {
    healthy: health.isHealthy,
    databases,
    collections: all.map((c) => c.name),
    loaded: loaded.map((c) => [c.name, Number(c.loadedPercentage)]),
    db_name: described.db_name,
    aliases_described: described.aliases,
    row_count: stats.data.row_count,
    load_state: state.state,
    index_fields: index.index_descriptions.map((i) => i.field_name),
    aliases: aliases.aliases,
    replica_shards: replicas.replicas.map((r) => r.shard_replicas.length),
    batch: batch.responses.map((r) => [r.collection_name, r.status.error_code, r.schema?.fields.length ?? 0]),
    index_statistics: indexStats.index_descriptions.map((i) => [i.field_name, i.index_name]),
    metric_nodes: topology(metrics.response).nodes_info.map((n) => n.infos.type),
  };
  check('dropAlias', await client.dropAlias({ alias: 'live' }));
  check('dropCollection', await client.dropCollection(collection));
  check('dropDatabase', await setup.dropDatabase({ db_name: db }));
  await client.closeConnection();
  await setup.closeConnection();
  console.log(JSON.stringify(result));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
