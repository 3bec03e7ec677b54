// Publishing one claimed batch on an amqplib ConfirmChannel: every message
// mandatory and persistent, messageId = eventId, all published before any
// confirm is awaited (pipelined). The outcome of each row is one of:
//
//   confirmed  a positive confirm and no basic.return: may become Published
//   returned   a basic.return came (unroutable): retry with backoff
//   nacked     the broker refused it: retry with backoff
//   not-sent   publish failed before it left (channel already closed): retry
//   unknown    no confirm (channel closed, timeout): never Published; the
//              lease expires and the row goes out again with the same eventId
//
// RabbitMQ sends a mandatory message's basic.return before its confirm, and
// amqplib emits the channel's 'return' event for it before it calls the
// publish callback, so a return is looked up by messageId when the confirm
// arrives.
import { EXCHANGE } from './topology.js';

// next resolves with value the next time emitter emits name; off() forgets it.
function next(emitter, name, value) {
  let listener;
  const promise = new Promise((resolve) => {
    listener = () => resolve(value);
    emitter.once(name, listener);
  });
  return { promise, off: () => emitter.off(name, listener) };
}

export async function publishBatch(ch, rows, { confirmTimeoutMs, correlateReturns = true, onPublished }) {
  const returned = new Map(); // messageId → why
  const onReturn = (msg) => returned.set(msg.properties.messageId, `returned: ${msg.fields.replyCode} ${msg.fields.replyText}`);
  if (correlateReturns) ch.on('return', onReturn);

  const closing = next(ch, 'close', 'closed');
  const closed = closing.promise;
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(resolve, confirmTimeoutMs, 'timeout');
  });
  try {
    const pending = [];
    const sent = [];
    for (const row of rows) {
      let ok = true;
      pending.push(
        new Promise((resolve) => {
          try {
            ok = ch.publish(
              EXCHANGE,
              row.eventType,
              Buffer.from(row.payload),
              {
                mandatory: true,
                persistent: true,
                messageId: row.eventId,
                type: row.eventType,
                contentType: 'application/json',
                timestamp: Math.floor(Date.now() / 1000),
              },
              (err) => {
                if (!err) {
                  const why = returned.get(row.eventId);
                  resolve(why ? { kind: 'returned', error: why } : { kind: 'confirmed' });
                } else if (err.message === 'message nacked') {
                  resolve({ kind: 'nacked', error: 'nacked by the broker' });
                } else {
                  resolve({ kind: 'unknown', error: err.message });
                }
              },
            );
            sent.push(row);
          } catch (err) {
            resolve({ kind: 'not-sent', error: `publish failed: ${err.message}` });
          }
        }),
      );
      // The write buffer is full: let it drain (or the channel die) first.
      if (!ok) {
        const drained = next(ch, 'drain', 'drained');
        await Promise.race([drained.promise, closed, timedOut]);
        drained.off();
      }
    }
    onPublished?.(sent);
    const late = Promise.race([closed, timedOut]).then((why) =>
      why === 'timeout' ? { kind: 'unknown', error: `no confirm within ${confirmTimeoutMs}ms` } : { kind: 'unknown', error: 'channel closed' },
    );
    return await Promise.all(pending.map((p) => Promise.race([p, late])));
  } finally {
    clearTimeout(timer);
    closing.off();
    ch.off('return', onReturn);
  }
}
