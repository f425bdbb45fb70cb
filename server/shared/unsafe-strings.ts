import { AppError } from "@/server/shared/errors";

/**
 * Strings Postgres cannot store: a NUL byte (text and jsonb reject U+0000) or an unpaired UTF-16 surrogate
 * (not valid UTF-8; jsonb rejects its `\uD800` escape). Such a string in any input once became a 500 deep in
 * the data layer, so the transports reject it at the boundary (`assertNoUnsafeStrings`) and the audit path,
 * which must never fail on what a caller sent, replaces those characters instead (`sanitizeStrings`). So
 * does a chat turn's storage: a tool's output (a `cat` of a binary file) or the model's text is no input a
 * caller could fix, and a turn must not fail on it.
 */

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNPAIRED_SURROGATES = new RegExp(UNPAIRED_SURROGATE.source, "g");
const NUL = "\u0000";

/** How deep the walk goes; deeper input is rejected as such (no legitimate input of Berth nests this far). */
const MAX_INPUT_DEPTH = 64;

export type UnsafeStringProblem = "nul" | "unpaired-surrogate" | "too-deep";

function unsafeStringProblem(value: string): Exclude<UnsafeStringProblem, "too-deep"> | null {
  if (value.includes(NUL)) return "nul";
  if (UNPAIRED_SURROGATE.test(value)) return "unpaired-surrogate";
  return null;
}

/**
 * The first string (value or object key) in `value` that Postgres could not store, with its path
 * ("messages.0.text"), or null. Walks iteratively (no recursion to blow the stack), arrays, plain objects,
 * Maps and Sets (superjson input), to MAX_INPUT_DEPTH.
 */
export function findUnsafeString(value: unknown): { path: string; problem: UnsafeStringProblem } | null {
  const stack: { value: unknown; path: string[] }[] = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: node, path } = stack.pop()!;
    if (typeof node === "string") {
      const problem = unsafeStringProblem(node);
      if (problem) return { path: path.join("."), problem };
      continue;
    }
    if (typeof node !== "object" || node === null) continue;
    if (path.length >= MAX_INPUT_DEPTH) return { path: path.join("."), problem: "too-deep" };
    const entries: [unknown, unknown][] =
      node instanceof Map
        ? [...node.entries()]
        : node instanceof Set
          ? [...node].map((item, index) => [String(index), item])
          : Array.isArray(node)
            ? node.map((item, index) => [String(index), item])
            : Object.entries(node);
    for (const [key, child] of entries) {
      const keyText = typeof key === "string" ? key : String(key);
      const keyProblem = unsafeStringProblem(keyText);
      if (keyProblem) return { path: [...path, printable(keyText)].join("."), problem: keyProblem };
      stack.push({ value: child, path: [...path, keyText] });
    }
  }
  return null;
}

const PROBLEM_TEXT: Record<UnsafeStringProblem, string> = {
  nul: "must not contain a NUL character (U+0000)",
  "unpaired-surrogate": "must be valid Unicode (it holds an unpaired surrogate)",
  "too-deep": `nests deeper than ${MAX_INPUT_DEPTH} levels`,
};

/** Throws BAD_REQUEST naming the field when `value` holds a string Postgres cannot store. */
export function assertNoUnsafeStrings(value: unknown, label = "input"): void {
  const found = findUnsafeString(value);
  if (!found) return;
  const path = found.path.length > 200 ? `${found.path.slice(0, 200)}…` : found.path;
  const field = path === "" ? label : path;
  throw new AppError("BAD_REQUEST", `unsafe string in ${field}: ${found.problem}`, {
    userMessage: `${field}: ${PROBLEM_TEXT[found.problem]}`,
    details: { field, problem: found.problem },
  });
}

/** The string with NUL bytes and unpaired surrogates replaced by U+FFFD (what a reader can still use). */
function sanitizeString(value: string): string {
  if (unsafeStringProblem(value) === null) return value;
  return value.replaceAll(NUL, "\uFFFD").replace(UNPAIRED_SURROGATES, "\uFFFD");
}

/**
 * `text` made storable (NUL bytes and unpaired surrogates replaced by U+FFFD), with how many of each were
 * replaced, so a caller can tell whoever reads the text (the model reading a tool result) that it changed.
 */
export function replaceUnstorableCharacters(text: string): { text: string; nul: number; surrogates: number } {
  if (unsafeStringProblem(text) === null) return { text, nul: 0, surrogates: 0 };
  const nul = text.split(NUL).length - 1;
  const surrogates = text.match(UNPAIRED_SURROGATES)?.length ?? 0;
  return { text: sanitizeString(text), nul, surrogates };
}

/** A deep copy of JSON-like `value` with every string and key sanitised; nesting beyond the bound is cut. */
export function sanitizeStrings<T>(value: T, depth = 0): T {
  if (typeof value === "string") return sanitizeString(value) as T;
  if (typeof value !== "object" || value === null || value instanceof Date) return value;
  if (depth >= MAX_INPUT_DEPTH) return "[too deep]" as T;
  if (Array.isArray(value)) return value.map((item: unknown) => sanitizeStrings(item, depth + 1)) as T;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => [sanitizeString(key), sanitizeStrings(child, depth + 1)]),
  ) as T;
}

/** A key that may hold control characters, shown escaped in an error message. */
function printable(key: string): string {
  return JSON.stringify(sanitizeString(key)).slice(1, -1);
}
