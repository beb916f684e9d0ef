// What every script here does with the Node SDK's replies, and the set-up and ending the
// single-feature scripts (geo.js, time.js) share.
'use strict';

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

module.exports = { check, createLoaded, run };
