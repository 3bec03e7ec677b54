// PostgreSQL through pg's Pool: connections come and go with the network;
// the pool reconnects by itself, we only must never let an 'error' event
// go unheard (pg emits one when a connection drops).
import pg from 'pg';

// Postgres bigint and numeric arrive as strings; sequence numbers fit a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, Number);

export function openPool(url, log, { max = 4 } = {}) {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: 5000, keepAlive: true });
  pool.on('error', (err) => log.error(err, 'idle database connection lost'));
  return pool;
}

// withTransaction runs fn(client) inside BEGIN ... COMMIT. A failure rolls
// back and rethrows; a connection that failed is thrown away, not reused.
// Note: when COMMIT itself fails, its outcome is unknown to us.
export async function withTransaction(pool, fn) {
  const client = await pool.connect();
  let broken;
  const onError = (err) => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    broken ??= err;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

export async function ping(pool) {
  await pool.query('SELECT 1');
  return true;
}
