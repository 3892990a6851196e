// Helpers shared by the benchmark pages (www/bench.js, www/bench_tfjs.js, www/bench_jaxjs.js):
// the page's log, the median, the WebGPU adapter's name as the page sees it (tfjs and jax-js do
// not report it), and the protocol page_test reads: `window.benchResult` and a "BENCH {json}"
// (or "LONG {json}") line, or "BENCH_ERROR message".

const logEl = document.getElementById("log");
logEl.textContent = "";

/** Print a line to the console (page_test reads it) and to the page. */
export const log = (s) => { console.log(s); logEl.textContent += s + "\n"; };

export const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

/** The name of the adapter a high-performance request gets, or null without WebGPU. */
export async function adapterName() {
  const a = await navigator.gpu?.requestAdapter({ powerPreference: "high-performance" });
  if (!a) return null;
  const i = a.info ?? (await a.requestAdapterInfo?.()) ?? {};
  const fallback = a.isFallbackAdapter ?? i.isFallbackAdapter;
  const name = i.description || [i.vendor, i.architecture].filter(Boolean).join(" ") || "unnamed adapter";
  return `${name}${fallback ? " (fallback adapter)" : ""}`;
}

/** Hand the result to page_test: `window.benchResult` and a "`tag` {json}" line. */
export function report(result, tag = "BENCH") {
  window.benchResult = result;
  log(`${tag} ${JSON.stringify(result)}`);
}

/** Run the page's `main`, reporting a failure as `{ error }` and a "BENCH_ERROR" line. */
export function runBench(main) {
  main().catch((e) => {
    window.benchResult = { error: String(e?.message ?? e) };
    console.error(e);
    log(`BENCH_ERROR ${e?.message ?? e}`);
  });
}
