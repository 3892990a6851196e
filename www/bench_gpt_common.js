// What the two GPT benchmark pages share (www/bench_gpt.js for wgrad, www/bench_gpt_jaxjs.js for
// jax-js): the knobs read from the URL, with the small GPT of examples/bench_gpt.rs as defaults,
// and the random token stream both train on.

const q = new URLSearchParams(location.search);
const num = (k, d) => Number(q.get(k) ?? d);

/** The model and run: `nLayer`, `nHead`, `nEmbd`, `block` (context), `bs`, `vocab`, `steps`, `lr`. */
export const knobs = Object.freeze({
  nLayer: num("nLayer", 2), nHead: num("nHead", 4), nEmbd: num("nEmbd", 64), block: num("block", 64),
  bs: num("bs", 16), vocab: num("vocab", 65), steps: num("steps", 5), warmup: 3, lr: num("lr", 1e-3),
});

/** `n` token ids below `vocab` from a fixed linear congruential stream (the same on both pages). */
export function randomTokens(n, vocab) {
  const out = new Uint8Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    out[i] = (s >>> 16) % vocab;
  }
  return out;
}

/** One line naming the model. */
export const describeModel = (k) =>
  `GPT ${k.nLayer} layers, ${k.nHead} heads, width ${k.nEmbd}, context ${k.block}, batch ${k.bs}, vocabulary ${k.vocab}`;
