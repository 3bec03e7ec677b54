// Used ONLY by the publish-after-commit variant (the order service without
// an outbox): publish an event straight after the order's commit, and wait
// for its confirm. Everything is right about this publish except where it
// sits: a crash between the commit and here loses the event for good.
import { connect, drop } from './amqp.js';
import { ring } from './nodes.js';
import { declareExchange, EXCHANGE } from './topology.js';

// urls are the broker's nodes, the preferred first: after a lost
// connection the next one is dialled first.
export async function directPublisher(urls, log, { heartbeatMs = 2000 } = {}) {
  if (urls.length === 0) throw new Error('the publish-after-commit variant needs --amqp-url or --amqp-urls');
  const nodes = ring(urls);
  let link = null;
  let connecting = null;
  const open = () =>
    (connecting ??= connect(nodes, {
      log,
      heartbeatMs,
      confirm: true,
      setup: declareExchange,
      onLost: () => {
        link = null;
      },
    }).then((l) => {
      link = l;
      connecting = null;
      return l;
    }));
  await open();
  return {
    async publish(event) {
      const { ch } = link ?? (await open());
      await new Promise((resolve) => {
        ch.publish(
          EXCHANGE,
          event.eventType,
          Buffer.from(JSON.stringify(event)),
          { mandatory: true, persistent: true, messageId: event.eventId, type: event.eventType, contentType: 'application/json' },
          (err) => {
            if (err) log.error(err, `direct publish of ${event.eventId}`);
            resolve();
          },
        );
      });
    },
    async close() {
      drop(link?.conn);
    },
  };
}
