// A tiny IndexedDB key-value store for the demo (usable on the page and in its worker): the
// training checkpoint and the BEAM cache live in the "wgrad-demo" database, store "kv".

const DB = "wgrad-demo", STORE = "kv";
let db = null;

function open() {
  if (db) return db;
  db = new Promise((ok, fail) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => ok(req.result);
    req.onerror = () => fail(req.error);
  });
  db.catch(() => (db = null));
  return db;
}

function run(mode, f) {
  return open().then((d) => new Promise((ok, fail) => {
    const tx = d.transaction(STORE, mode);
    const req = f(tx.objectStore(STORE));
    tx.oncomplete = () => ok(req.result);
    tx.onerror = () => fail(tx.error);
    tx.onabort = () => fail(tx.error);
  }));
}

export const get = (key) => run("readonly", (s) => s.get(key));
export const put = (key, value) => run("readwrite", (s) => s.put(value, key));
export const del = (key) => run("readwrite", (s) => s.delete(key));
