// Crash points, as faultline's protocol (docs/protocol.md) asks: named call
// sites armed from outside, at start by FAULTLINE_CRASHPOINTS
// (name=kill@3,other=pause@1,x=delay:200ms@*) or at run time over HTTP
// (see control.js). The hit is written to the event log and fsynced before
// the action: kill is SIGKILL (no finally block, no exit handler runs),
// pause is SIGSTOP (faultline sends SIGCONT), delay awaits a timer.
import { parseDuration } from './config.js';

export function parseArming(spec) {
  const m = /^(kill|pause|delay:([^@]+))(?:@(\*|[1-9]\d*))?$/.exec(String(spec).trim());
  if (!m) throw new Error(`bad arming ${JSON.stringify(spec)}: want kill, pause or delay:DURATION, then @N or @*`);
  const arming = { action: m[2] ? 'delay' : m[1], hit: m[3] === '*' ? 0 : Number(m[3] ?? 1) };
  if (m[2]) {
    arming.delayMs = parseDuration(m[2]);
    if (!(arming.delayMs > 0)) throw new Error(`bad arming ${JSON.stringify(spec)}: delay needs a positive duration`);
    arming.text = `delay:${m[2]}@${m[3] ?? 1}`;
  } else {
    arming.text = `${arming.action}@${m[3] ?? 1}`;
  }
  return arming;
}

export class UnknownPoint extends Error {}

// crashPoints serves the named points of one process; log is its event log.
export function crashPoints(log, names) {
  const points = new Map(names.map((name) => [name, { name, arming: null, hits: 0, fired: 0 }]));

  function lookup(name) {
    const p = points.get(name);
    if (!p) throw new UnknownPoint(`unknown crash point ${JSON.stringify(name)} (known: ${[...points.keys()].join(', ')})`);
    return p;
  }

  function arm(name, spec) {
    const p = lookup(name);
    p.arming = parseArming(spec);
    p.hits = 0;
  }

  return {
    arm,
    disarm(name) {
      lookup(name).arming = null;
    },
    list: () =>
      [...points.values()].map((p) => ({ name: p.name, armed: p.arming !== null, arming: p.arming?.text ?? '', hits: p.hits, fired: p.fired })),
    // armFromEnv arms what FAULTLINE_CRASHPOINTS names; it throws on an
    // unknown name or a malformed arming (the caller exits non-zero).
    armFromEnv(env = process.env.FAULTLINE_CRASHPOINTS ?? '') {
      for (const item of env.split(',').map((s) => s.trim()).filter(Boolean)) {
        const eq = item.indexOf('=');
        if (eq < 0) throw new Error(`FAULTLINE_CRASHPOINTS: ${JSON.stringify(item)}: want name=arming`);
        arm(item.slice(0, eq).trim(), item.slice(eq + 1));
      }
    },
    // hit is the call site: `await points.hit('order:committed')`. Unarmed it
    // is one map lookup and returns at once.
    hit(name) {
      const p = points.get(name);
      if (!p?.arming) return undefined;
      p.hits++;
      const { action, hit, delayMs } = p.arming;
      if (hit !== 0 && p.hits !== hit) return undefined;
      p.fired++;
      if (hit !== 0) p.arming = null; // one-shot
      log.log('crashpoint', { point: name, hit: p.hits, action });
      log.sync();
      if (action === 'kill') process.kill(process.pid, 'SIGKILL');
      if (action === 'pause') process.kill(process.pid, 'SIGSTOP'); // runs on once SIGCONT comes
      if (action === 'delay') return new Promise((resolve) => setTimeout(resolve, delayMs));
      return undefined;
    },
  };
}
