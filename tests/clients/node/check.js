// What every script here does with the Node SDK's replies, and the set-up and ending the
// single-feature scripts (geo.js, time.js, nullvec.js) share.
'use strict';

const { MilvusClient } = require('@zilliz/milvus2-sdk-node');

/** Fail loudly on a non-success status: the SDK returns errors as values. */
function check(what, reply) {
  const status = reply && (reply.status || reply);
  if (status && status.error_code !== undefined && status.error_code !== 'Success') {
    throw new Error(`${what}: ${status.error_code} ${status.reason}`);
  }
  return reply;
}

/**
 * Collection `name` of `fields` (Strong consistency, `properties`), `data` inserted, each of
 * `indexes` ([field, index_type, extra params]) created, loaded.
 */
async function createLoaded(client, name, { fields, properties, data, indexes }) {
  check(
    'createCollection',
    await client.createCollection({
      collection_name: name,
      fields,
      properties,
      consistency_level: 'Strong',
    }),
  );
  check('insert', await client.insert({ collection_name: name, data }));
  for (const [field, index_type, extra] of indexes) {
    check(
      `createIndex ${field}`,
      await client.createIndex({ collection_name: name, field_name: field, index_type, ...extra }),
    );
  }
  check('loadCollection', await client.loadCollection({ collection_name: name }));
}

/** A script's `main`: any error prints its stack and exits non-zero. */
function run(main) {
  main().catch((err) => {
    console.error(err && err.stack ? err.stack : String(err));
    process.exit(1);
  });
}

/**
 * A single-feature script (`node script.js ADDRESS COLLECTION`): `body(client, name)` runs
 * against the collection named, which is dropped afterwards; what it returns is printed as
 * one JSON object for the test to check.
 */
function runOnCollection(body) {
  run(async () => {
    const [address, name] = process.argv.slice(2);
    const client = new MilvusClient({ address, timeout: 20000 });
    await client.connectPromise;
    const observed = await body(client, name);
    check('dropCollection', await client.dropCollection({ collection_name: name }));
    await client.closeConnection();
    console.log(JSON.stringify(observed));
  });
}

module.exports = { check, createLoaded, runOnCollection };
