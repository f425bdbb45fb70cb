/**
 * Host directories no client may learn (the workspace base dir, the install's repo and data dirs). The
 * composition roots register them; the error mappings (tRPC, routes) and the tools' error texts pass what
 * they show through `redactHostPaths`, so even an error that quotes a host path (an fs error, a message a
 * library built) reaches a caller without it. Kept on globalThis: Next may load this module twice.
 */
const globalForHostPaths = globalThis as unknown as { berthHostPaths?: Set<string> };

function registry(): Set<string> {
  return (globalForHostPaths.berthHostPaths ??= new Set());
}

/** Registers an absolute host directory to hide (longer ones are replaced first). "/" is ignored. */
export function registerHostPath(absolutePath: string): void {
  const trimmed = absolutePath.replace(/\/+$/, "");
  if (trimmed.length > 1 && trimmed.startsWith("/")) registry().add(trimmed);
}

const REDACTED_HOST_PATH = "<host>";

/** The text with every registered host directory replaced by `<host>`. */
export function redactHostPaths(text: string): string {
  const paths = [...registry()].sort((a, b) => b.length - a.length);
  let result = text;
  for (const hostPath of paths) {
    if (result.includes(hostPath)) result = result.replaceAll(hostPath, REDACTED_HOST_PATH);
  }
  return result;
}

/** A deep copy of JSON-like `value` with every string redacted (for error details). */
export function redactHostPathsDeep<T>(value: T, depth = 0): T {
  if (typeof value === "string") return redactHostPaths(value) as T;
  if (typeof value !== "object" || value === null || depth > 16) return value;
  if (Array.isArray(value)) return value.map((item: unknown) => redactHostPathsDeep(item, depth + 1)) as T;
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => [key, redactHostPathsDeep(child, depth + 1)]),
  ) as T;
}
