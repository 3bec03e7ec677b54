// RabbitMQ connections through amqplib: connect with heartbeats and a
// handshake timeout, retrying with backoff until it works. Losing the
// connection is reported through onLost once; the caller reconnects.
import amqp from 'amqplib';
import { backoff, sleep } from './backoff.js';

function withHeartbeat(url, seconds) {
  const u = new URL(url);
  if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', String(seconds));
  return u.toString();
}

// connect returns {conn, ch} once a connection, its channel (a
// ConfirmChannel with confirm: true) and setup(ch) all succeeded.
export async function connect(url, { log, confirm = false, setup, reconnectMaxMs = 2000, stopping = () => false, onLost }) {
  for (let attempt = 1; !stopping(); attempt++) {
    let conn;
    try {
      conn = await amqp.connect(withHeartbeat(url, 5), { timeout: 5000 });
      let ready = false;
      let lost = false;
      const lose = (why) => {
        if (lost) return;
        lost = true;
        if (!ready) return;
        log.log('disconnected', { error: String(why?.message ?? why ?? 'closed') });
        onLost?.(why);
      };
      conn.on('error', lose);
      conn.on('close', lose);
      const ch = confirm ? await conn.createConfirmChannel() : await conn.createChannel();
      ch.on('error', lose);
      ch.on('close', () => {
        lose('channel closed');
        conn.close().catch(() => {});
      });
      await setup?.(ch);
      if (lost) throw new Error('connection lost during setup');
      ready = true;
      log.log('connected', { detail: `amqp, attempt ${attempt}` });
      return { conn, ch };
    } catch (err) {
      log.error(err, `amqp connect, attempt ${attempt}`);
      conn?.close().catch(() => {});
      await sleep(backoff(attempt, 100, reconnectMaxMs));
    }
  }
  return null;
}

// drop closes a connection without waiting on a peer that may be gone.
export function drop(conn) {
  if (!conn) return;
  const socket = conn.connection?.stream;
  conn.close().catch(() => {});
  setTimeout(() => socket?.destroy(), 1000).unref();
}
