// What every script here does with the Node SDK's replies.
'use strict';

/** Fail loudly on a non-success status: the SDK returns errors as values. */
function check(what, reply) {
  const status = reply && (reply.status || reply);
  if (status && status.error_code !== undefined && status.error_code !== 'Success') {
    throw new Error(`${what}: ${status.error_code} ${status.reason}`);
  }
  return reply;
}

module.exports = { check };
