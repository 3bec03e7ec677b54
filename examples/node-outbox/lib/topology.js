// The broker objects of the pipeline. Every declaration is idempotent, so a
// program declares what it needs at every (re)connect.
export const EXCHANGE = 'orders';
export const QUEUE = 'inventory.orders';
export const DEAD_LETTER_EXCHANGE = 'inventory.orders.dlx';
export const DEAD_LETTER_QUEUE = 'inventory.orders.dead';
export const ROUTING_KEYS = ['order.created', 'order.paid', 'order.cancelled'];

// What a publisher needs: the durable topic exchange.
export async function declareExchange(ch) {
  await ch.assertExchange(EXCHANGE, 'topic', { durable: true });
}

// What the consumer needs: the exchange, a durable quorum queue bound with
// every routing key and dead-lettering into its own exchange and queue.
export async function declareConsumer(ch) {
  await declareExchange(ch);
  await ch.assertExchange(DEAD_LETTER_EXCHANGE, 'fanout', { durable: true });
  await ch.assertQueue(DEAD_LETTER_QUEUE, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await ch.bindQueue(DEAD_LETTER_QUEUE, DEAD_LETTER_EXCHANGE, '');
  await ch.assertQueue(QUEUE, {
    durable: true,
    arguments: { 'x-queue-type': 'quorum', 'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE },
  });
  for (const key of ROUTING_KEYS) await ch.bindQueue(QUEUE, EXCHANGE, key);
}
