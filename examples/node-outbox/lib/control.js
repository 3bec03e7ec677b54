// The control endpoints of the protocol: GET /healthz (200 once the process
// can work), GET /crashpoints, PUT and DELETE /crashpoints/{name}. A program
// with an HTTP API of its own (the order service) passes its router as
// `app`, so one server carries both.
import http from 'node:http';
import { UnknownPoint } from './crashpoints.js';

// send answers the request and returns true, so that a route can end with
// `return send(...)` and tell serveControl it answered (see app below).
export function send(res, status, body) {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, body === undefined || typeof body === 'string' ? {} : { 'Content-Type': 'application/json' });
  res.end(text);
  return true;
}

export async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

async function crashpointRoute(points, req, res, name) {
  if (name === '' && req.method === 'GET') return send(res, 200, points.list());
  if (name === '') return send(res, 405, 'GET /crashpoints\n');
  try {
    if (req.method === 'PUT') points.arm(name, await readBody(req));
    else if (req.method === 'DELETE') points.disarm(name);
    else return send(res, 405, 'PUT or DELETE /crashpoints/{name}\n');
    return send(res, 204);
  } catch (err) {
    return send(res, err instanceof UnknownPoint ? 404 : 400, `${err.message}\n`);
  }
}

// serveControl listens on addr (host:port). healthy() resolves true when the
// process can do its work; app(req, res, url) handles any other route and
// returns false when it has none.
export async function serveControl(addr, { points, healthy, app = async () => false }) {
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    try {
      if (url.pathname === '/healthz') {
        const ok = await healthy().catch(() => false);
        return send(res, ok ? 200 : 503, ok ? 'ok\n' : 'not ready\n');
      }
      if (url.pathname === '/crashpoints' || url.pathname.startsWith('/crashpoints/')) {
        return await crashpointRoute(points, req, res, decodeURIComponent(url.pathname.slice('/crashpoints/'.length)));
      }
      if (!(await app(req, res, url))) send(res, 404, 'not found\n');
    } catch (err) {
      if (!res.headersSent) send(res, 500, `${err.message}\n`);
      else res.destroy();
    }
  });
  const at = addr.lastIndexOf(':');
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(addr.slice(at + 1)), addr.slice(0, at).replace(/^\[|\]$/g, '') || undefined, resolve);
  });
  return server;
}
