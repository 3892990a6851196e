// Helpers shared by the benchmark pages of other libraries (www/bench_tfjs.js,
// www/bench_jaxjs.js): the page's log, the median, and the WebGPU adapter's name as the page
// sees it (those libraries do not report it).

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
