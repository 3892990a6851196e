// A tiny dependency-free static file server for the browser pages (Node 20):
//   node scripts/serve.mjs [port] [root]     (defaults: 8123, the repository root; the pages are
//                                            served cross-origin isolated unless ISOLATED=0)
// Serves files with their MIME types (.wasm as application/wasm so streaming compilation works)
// and .gz files as raw bytes (application/gzip, no Content-Encoding), so the page's
// DecompressionStream sees gzip. Also `import { serve } from "./serve.mjs"` for scripts.

import { createServer } from "node:http";
import { createReadStream, promises as fs } from "node:fs";
import { extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const MIME = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".ts": "text/plain; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".md": "text/plain; charset=utf-8",
  ".wasm": "application/wasm",
  ".gz": "application/gzip",
  ".png": "image/png",
  ".svg": "image/svg+xml",
  ".ico": "image/x-icon",
  ".safetensors": "application/octet-stream",
};

/**
 * Start serving `root` on `port` (0 picks a free one) on 127.0.0.1. Resolves to
 * `{ server, port, url, close() }` once listening. `isolated`: every response carries the
 * COOP/COEP headers that make a page cross-origin isolated (SharedArrayBuffer, so wgrad's
 * WebAssembly kernels run on several threads).
 */
export function serve({ port = 8123, root = process.cwd(), quiet = true, isolated = false } = {}) {
  const isolation = isolated
    ? { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" }
    : {};
  const base = resolve(root);
  const server = createServer(async (req, res) => {
    try {
      const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
      let file = normalize(join(base, path));
      if (file !== base && !file.startsWith(base + sep)) {
        res.writeHead(403).end("forbidden");
        return;
      }
      let st = await fs.stat(file).catch(() => null);
      if (st && st.isDirectory()) {
        file = join(file, "index.html");
        st = await fs.stat(file).catch(() => null);
      }
      if (!st || !st.isFile()) {
        if (!quiet) console.log(`404 ${path}`);
        res.writeHead(404, { "Content-Type": "text/plain" }).end(`not found: ${path}`);
        return;
      }
      res.writeHead(200, {
        "Content-Type": MIME[extname(file).toLowerCase()] ?? "application/octet-stream",
        "Content-Length": st.size,
        "Cache-Control": "no-store",
        ...isolation,
      });
      if (req.method === "HEAD") return res.end();
      createReadStream(file).pipe(res);
    } catch (e) {
      res.writeHead(500, { "Content-Type": "text/plain" }).end(String(e));
    }
  });
  return new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(port, "127.0.0.1", () => {
      const p = server.address().port;
      ok({ server, port: p, url: `http://127.0.0.1:${p}/`, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const port = Number(process.argv[2] ?? 8123);
  const root = process.argv[3] ?? join(fileURLToPath(new URL(".", import.meta.url)), "..");
  // Cross-origin isolated unless ISOLATED=0: the demo's WebAssembly kernels then use every core.
  const isolated = process.env.ISOLATED !== "0";
  const { url } = await serve({ port, root, quiet: false, isolated });
  console.log(`serving ${resolve(root)} at ${url}${isolated ? " (cross-origin isolated: COOP/COEP)" : ""}`);
  console.log(`  demo:  ${url}www/index.html?steps=100&bs=128`);
  console.log(`  bench: ${url}www/bench.html?bs=128&steps=5`);
}
