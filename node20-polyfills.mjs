// ES2024 built-ins that Node 20 lacks (Object.groupBy, Map.groupBy, Promise.withResolvers), for any test
// dependency that assumes them. Delete once the project is on Node >= 22.
const def = (o, n, v) => {
  if (typeof o[n] !== "function")
    Object.defineProperty(o, n, { value: v, writable: true, configurable: true });
};
def(Object, "groupBy", (items, fn) => {
  const out = Object.create(null);
  let i = 0;
  for (const x of items) (out[fn(x, i++)] ??= []).push(x);
  return out;
});
def(Map, "groupBy", (items, fn) => {
  const out = new Map();
  let i = 0;
  for (const x of items) {
    const k = fn(x, i++);
    const a = out.get(k);
    if (a) a.push(x);
    else out.set(k, [x]);
  }
  return out;
});
def(Promise, "withResolvers", () => {
  let resolve, reject;
  const promise = new Promise((r, j) => {
    resolve = r;
    reject = j;
  });
  return { promise, resolve, reject };
});
