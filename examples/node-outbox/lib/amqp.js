// RabbitMQ connections through amqplib: connect with heartbeats and a
// handshake timeout, retrying with backoff until it works. Losing the
// connection is reported through onLost once; the caller reconnects.
//
// The addresses are a ring (lib/nodes.js): each attempt dials the next
// node, so after a lost connection the node after the lost one is tried
// first; the backoff comes after a full round without an answer. A frozen
// node answers nothing and closes nothing: the heartbeat (heartbeatMs, 2 s
// by default) is what notices it.
import amqp from 'amqplib';
import { backoff, sleep } from './backoff.js';
import { heartbeatSeconds } from './nodes.js';

function withHeartbeat(url, seconds) {
  const u = new URL(url);
  if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', String(seconds));
  return u.toString();
}

// connect returns {conn, ch, node} once a connection to one of nodes (a
// ring), its channel (a ConfirmChannel with confirm: true) and setup(ch)
// all succeeded; node is the address's position in the list.
export async function connect(nodes, { log, confirm = false, setup, reconnectMaxMs = 2000, heartbeatMs = 2000, stopping = () => false, onLost }) {
  for (let attempt = 1, rounds = 0; !stopping(); attempt++) {
    let conn;
    const { url, index } = nodes.next();
    try {
      conn = await amqp.connect(withHeartbeat(url, heartbeatSeconds(heartbeatMs)), { timeout: 5000 });
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
      log.log('connected', { detail: `amqp node=${index + 1}/${nodes.size}, attempt ${attempt}` });
      return { conn, ch, node: index };
    } catch (err) {
      log.error(err, `amqp connect to node ${index + 1}, attempt ${attempt}`);
      conn?.close().catch(() => {});
      // The next node at once, until a full round went unanswered.
      if (attempt % nodes.size === 0) await sleep(backoff(++rounds, 100, reconnectMaxMs));
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
