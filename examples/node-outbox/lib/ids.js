// UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits; sorts
// by creation time, which suits an eventId and the outbox's dispatch index.
import { randomBytes } from 'node:crypto';

export function uuidv7() {
  const b = randomBytes(16);
  b.writeUIntBE(Date.now(), 0, 6);
  b[6] = (b[6] & 0x0f) | 0x70; // version 7
  b[8] = (b[8] & 0x3f) | 0x80; // variant 10
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
