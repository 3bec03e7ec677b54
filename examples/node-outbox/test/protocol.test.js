// Unit tests of the protocol pieces that need no broker or database:
// node --test (npm test).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { backoff } from '../lib/backoff.js';
import { parseDuration } from '../lib/config.js';
import { crashPoints, parseArming } from '../lib/crashpoints.js';
import { openEventLog } from '../lib/eventlog.js';
import { uuidv7 } from '../lib/ids.js';
import { send, serveControl } from '../lib/control.js';
import { brokerUrls, heartbeatSeconds, ring } from '../lib/nodes.js';

// tempFile gives a file in a folder of its own that is removed when the test
// ends, so the suite leaves nothing in the system's temporary folder.
function tempFile(t, name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'faultline-node-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, name);
}

test('durations read like Go', () => {
  assert.equal(parseDuration('2s'), 2000);
  assert.equal(parseDuration('1.5s'), 1500);
  assert.equal(parseDuration('1m30s'), 90_000);
  for (const bad of ['', '2', 's', '2s x', '-1s']) assert.throws(() => parseDuration(bad), bad);
});

test('armings', () => {
  assert.deepEqual(parseArming('kill'), { action: 'kill', hit: 1, text: 'kill@1' });
  assert.deepEqual(parseArming('pause@3'), { action: 'pause', hit: 3, text: 'pause@3' });
  assert.deepEqual(parseArming('delay:200ms@*'), { action: 'delay', hit: 0, delayMs: 200, text: 'delay:200ms@*' });
  for (const bad of ['', 'boom', 'kill@0', 'kill:1s', 'delay', 'delay:x@1', 'pause@-1']) assert.throws(() => parseArming(bad), bad);
});

test('a point acts on its hit, logs it first, then disarms', async (t) => {
  const file = tempFile(t, 'events.jsonl');
  const points = crashPoints(openEventLog(file, 'p-1'), ['a:b']);
  assert.throws(() => points.armFromEnv('x=kill'), /unknown crash point "x"/);
  assert.throws(() => points.armFromEnv('a:b=explode'), /bad arming/);
  points.armFromEnv('a:b=delay:1ms@2');
  assert.equal(points.hit('a:b'), undefined);
  await points.hit('a:b');
  assert.equal(points.hit('a:b'), undefined);
  assert.deepEqual(points.list(), [{ name: 'a:b', armed: false, arming: '', hits: 2, fired: 1 }]);
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, 1);
  assert.equal(lines[0].event, 'crashpoint');
  assert.equal(lines[0].process, 'p-1');
  assert.deepEqual([lines[0].point, lines[0].hit, lines[0].action], ['a:b', 2, 'delay']);
  assert.match(lines[0].time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
});

test('event-log lines leave empty fields out', (t) => {
  const file = tempFile(t, 'events.jsonl');
  const log = openEventLog(file, 'relay-1');
  log.batch([
    ['claimed', { eventId: 'e1', claimId: 'relay-1:x', attempt: 1, error: undefined }],
    ['delivered', { eventId: 'e1', redelivered: false }],
  ]);
  const [a, b] = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(Object.keys(a), ['time', 'process', 'event', 'eventId', 'claimId', 'attempt']);
  assert.deepEqual(Object.keys(b), ['time', 'process', 'event', 'eventId']);
});

test('backoff doubles up to its cap, with jitter', () => {
  for (let i = 0; i < 100; i++) {
    const d1 = backoff(1, 100, 1000);
    const d5 = backoff(5, 100, 1000);
    assert.ok(d1 >= 50 && d1 <= 100, `${d1}`);
    assert.ok(d5 >= 500 && d5 <= 1000, `${d5}`);
  }
});

test('uuidv7 ids sort by time', async () => {
  const a = uuidv7();
  await new Promise((r) => setTimeout(r, 2));
  const b = uuidv7();
  assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.ok(a < b);
});

test('a route that answered with send is not answered again', async (t) => {
  let answered = 0;
  const returned = [];
  const server = await serveControl('127.0.0.1:0', {
    points: crashPoints(openEventLog(tempFile(t, 'e.jsonl'), 'p-1'), []),
    healthy: async () => true,
    app: async (req, res, url) => {
      if (url.pathname !== '/orders') return false;
      answered++;
      const done = send(res, 201, { ok: true });
      returned.push(done);
      return done;
    },
  });
  const errors = [];
  server.on('request', (req, res) => res.on('error', (err) => errors.push(err.code)));
  try {
    const base = `http://127.0.0.1:${server.address().port}`;
    const created = await fetch(`${base}/orders`, { method: 'POST' });
    assert.equal(created.status, 201);
    assert.deepEqual(await created.json(), { ok: true });
    assert.equal((await fetch(`${base}/nothing`)).status, 404);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    assert.equal(answered, 1);
    assert.deepEqual(errors, []);
    // serveControl answers 404 after a route that returns falsy: send must
    // say it answered (Node 18 crashed the order service with
    // ERR_STREAM_WRITE_AFTER_END when it did not).
    assert.deepEqual(returned, [true]);
  } finally {
    server.close();
  }
});

test('broker addresses: --amqp-urls replaces --amqp-url, errors never show a URL', () => {
  const a = 'amqp://u:p@127.0.0.1:1/v';
  const b = 'amqp://u:p@127.0.0.1:2/v';
  assert.deepEqual(brokerUrls('', a), [a]);
  assert.deepEqual(brokerUrls(`${a}, ${b}`, 'amqp://ignored/'), [a, b]);
  assert.deepEqual(brokerUrls(` ${b} `, ''), [b]);
  for (const [urls, url, want] of [
    ['', '', /no broker address/],
    [`${a},,${b}`, '', /address 2 is not an AMQP URL/],
    [`${a},http://u:p@x/`, '', /address 2 is not an AMQP URL/],
    ['', 'http://u:p@x/', /address 1 is not an AMQP URL/],
  ]) {
    assert.throws(() => brokerUrls(urls, url), (err) => want.test(err.message) && !err.message.includes('u:p'), `${urls} | ${url}`);
  }
});

test('the ring gives the next node after each one, round robin; pinned stays on the first', () => {
  const urls = ['amqp://a/', 'amqp://b/', 'amqp://c/'];
  for (const [name, r, want] of [
    ['one node', ring(urls.slice(0, 1)), [0, 0, 0]],
    ['three nodes', ring(urls), [0, 1, 2, 0, 1, 2, 0]],
    ['pinned', ring(urls, { pinned: true }), [0, 0, 0]],
  ]) {
    assert.deepEqual(
      want.map(() => r.next()),
      want.map((i) => ({ url: urls[i], index: i })),
      name,
    );
  }
  assert.equal(ring(urls).size, 3);
  assert.equal(ring(urls, { pinned: true }).size, 1);
});

test('heartbeat in whole seconds, at least one', () => {
  assert.equal(heartbeatSeconds(2000), 2);
  assert.equal(heartbeatSeconds(1500), 2);
  assert.equal(heartbeatSeconds(200), 1);
});
