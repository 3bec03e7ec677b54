// The faultline event log (docs/protocol.md): one JSON object per line,
// appended to a file with one write(2) per call, so a SIGKILL loses
// nothing already logged. Fields left empty are left out.
import fs from 'node:fs';

// Microsecond timestamps from the monotonic clock: lines of one process
// never go back in time, and lines a few microseconds apart keep their order
// when faultline merges the logs.
function now() {
  const t = performance.timeOrigin + performance.now();
  const ms = Math.floor(t);
  const micros = String(Math.floor((t - ms) * 1000)).padStart(3, '0');
  return new Date(ms).toISOString().replace('Z', `${micros}Z`);
}

const fields = ['eventId', 'claimId', 'aggregateId', 'sequence', 'redelivered', 'attempt', 'point', 'hit', 'action', 'error', 'detail'];

function line(processName, event, extra) {
  const entry = { time: now(), process: processName, event };
  for (const f of fields) {
    const v = extra[f];
    if (v !== undefined && v !== null && v !== '' && v !== false && v !== 0) entry[f] = v;
  }
  return `${JSON.stringify(entry)}\n`;
}

export function openEventLog(path, processName) {
  const fd = path ? fs.openSync(path, 'a') : 2;
  return {
    // log writes one line: log('marked', {eventId, claimId}).
    log(event, extra = {}) {
      fs.writeSync(fd, line(processName, event, extra));
    },
    // batch writes several lines in one write: batch([['claimed', {...}], ...]).
    batch(entries) {
      if (entries.length === 0) return;
      fs.writeSync(fd, entries.map(([event, extra]) => line(processName, event, extra)).join(''));
    },
    error(err, detail) {
      fs.writeSync(fd, line(processName, 'error', { error: String(err?.message ?? err), detail }));
    },
    // sync makes what was written durable (crash point lines).
    sync() {
      if (fd !== 2) fs.fsyncSync(fd);
    },
  };
}
