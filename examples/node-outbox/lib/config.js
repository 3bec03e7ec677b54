// Command-line flags with an environment fallback: --lease=2s or LEASE=2s.
// Each program declares its flags with their defaults; durations are
// written like Go's (250ms, 2s, 1.5s, 1m).
import { parseArgs } from 'node:util';

const units = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

// parseDuration reads a Go-style duration (250ms, 2s, 1.5s, 1m30s) into ms.
export function parseDuration(text) {
  const s = String(text).trim();
  const part = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;
  let ms = 0;
  let end = 0;
  for (let m; (m = part.exec(s)); end = part.lastIndex) ms += Number(m[1]) * units[m[2]];
  if (end === 0 || end !== s.length) throw new Error(`bad duration ${JSON.stringify(text)} (want e.g. 250ms, 2s, 1.5s)`);
  return ms;
}

const envName = (flag) => flag.toUpperCase().replaceAll('-', '_');

// flags maps each flag to its default: a string, a number, or
// {duration: '2s'}. The result has camelCase keys; durations are in ms.
export function loadConfig(flags, argv = process.argv.slice(2)) {
  const options = Object.fromEntries(Object.keys(flags).map((name) => [name, { type: 'string' }]));
  const { values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false });
  const config = {};
  for (const [name, def] of Object.entries(flags)) {
    const raw = values[name] ?? process.env[envName(name)];
    const key = name.replace(/-(\w)/g, (_, c) => c.toUpperCase());
    try {
      if (def !== null && typeof def === 'object') {
        config[key] = parseDuration(raw ?? def.duration);
      } else if (typeof def === 'number') {
        const n = raw === undefined ? def : Number(raw);
        if (!Number.isInteger(n)) throw new Error(`want an integer, got ${JSON.stringify(raw)}`);
        config[key] = n;
      } else {
        config[key] = raw ?? def;
      }
    } catch (err) {
      throw new Error(`--${name}: ${err.message}`);
    }
  }
  return config;
}

// fatal reports a start-up error and exits non-zero.
export function fatal(err) {
  process.stderr.write(`${process.argv[1]}: ${err.message ?? err}\n`);
  process.exit(2);
}
