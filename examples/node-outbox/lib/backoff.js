// Exponential backoff with equal jitter: attempt 1 waits about base, each
// further attempt doubles it, up to max; half of it fixed, half random.
export function backoff(attempt, baseMs, maxMs) {
  const d = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(d / 2 + Math.random() * (d / 2));
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
