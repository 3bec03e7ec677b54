// A cluster's broker addresses, taken in turn: --amqp-urls (comma-separated,
// the preferred node first) or the one --amqp-url. A program connects to the
// first node that answers; when its connection is lost it connects to the
// NEXT node, round robin, so a node killed, partitioned or frozen is left
// for the others.

// brokerUrls is the node list of the flags: urls when given, else [url].
// Every address must be an amqp:// or amqps:// URL; an error names an
// address by its position only (the URLs carry the password).
export function brokerUrls(urls, url) {
  const list = urls && urls.trim() !== '' ? urls.split(',').map((u) => u.trim()) : url ? [url] : [];
  if (list.length === 0) throw new Error('no broker address: give --amqp-url or --amqp-urls');
  list.forEach((u, i) => {
    let scheme = '';
    try {
      scheme = new URL(u).protocol;
    } catch {
      // not a URL at all
    }
    if (scheme !== 'amqp:' && scheme !== 'amqps:') throw new Error(`broker address ${i + 1} is not an AMQP URL (amqp://user:pass@host:port/vhost)`);
  });
  return list;
}

// ring hands out the addresses in turn: the first call gives the first,
// every later call the one after the last given, wrapping round. pinned:
// always the first (a program that ignores the rest of the cluster).
export function ring(urls, { pinned = false } = {}) {
  const list = pinned ? urls.slice(0, 1) : [...urls];
  let next = 0;
  return {
    size: list.length,
    next() {
      const index = next;
      next = (next + 1) % list.length;
      return { url: list[index], index };
    },
  };
}

// heartbeatSeconds is the AMQP heartbeat to ask for (whole seconds, at
// least 1) for a heartbeat of ms milliseconds.
export function heartbeatSeconds(ms) {
  return Math.max(1, Math.round(ms / 1000));
}
