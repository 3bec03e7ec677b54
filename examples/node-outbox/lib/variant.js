// The deliberately broken variants (negative controls). Every program reads
// VARIANT (faultline sets it from {{variant}}), accepts every name and
// applies only its own; "correct" (or empty) is the correct pipeline.
export const variants = {
  'publish-after-commit': { program: 'order', removes: 'outbox row in the order transaction: the service commits, then publishes itself' },
  'unfenced-published': { program: 'relay', removes: 'claim id in the Published write: a relay past its lease overwrites the new claim' },
  'lease-ignored': { program: 'relay', removes: 'lease expiry in the claim: a relay takes the rows another relay holds while its lease is live' },
  'ignore-return': { program: 'relay', removes: 'basic.return correlation: an unroutable, positively confirmed message is marked Published' },
  'ack-before-commit': { program: 'inventory', removes: 'ack after commit: the consumer acks on receipt, then commits' },
  'no-inbox': { program: 'inventory', removes: 'inbox row: every delivery takes effect, redeliveries too' },
  'dead-letter-multiple': { program: 'inventory', removes: 'poison rejected alone: the nack sets multiple, dead-lettering every earlier unacked delivery of the channel' },
};

// variantFor returns the variant name when it is this program's, else
// 'correct'; an unknown name throws.
export function variantFor(program, name = process.env.VARIANT ?? '') {
  if (name === '' || name === 'correct') return 'correct';
  const v = variants[name];
  if (!v) throw new Error(`unknown VARIANT ${JSON.stringify(name)} (known: correct, ${Object.keys(variants).join(', ')})`);
  return v.program === program ? name : 'correct';
}
