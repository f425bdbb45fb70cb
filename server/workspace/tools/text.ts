import type { Readable } from "node:stream";

/** Bash and PowerShell output cap in characters (reference `_bash.py`). */
export const MAX_OUTPUT_CHARS = 30_000;
export const TRUNCATION_NOTICE = "\n... (output truncated)";

export function normalizeNewlines(text: string): string {
  return text.replace(/\r\n?/g, "\n");
}

export function truncateOutput(text: string, limit = MAX_OUTPUT_CHARS): string {
  return text.length > limit ? text.slice(0, limit) + TRUNCATION_NOTICE : text;
}

/** Reads a stream into one Buffer, refusing more than `maxBytes` (callers pick a cap; nothing unbounded). */
export async function readCapped(
  stream: Readable,
  maxBytes: number,
): Promise<{ data: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    if (size + chunk.length > maxBytes) {
      chunks.push(chunk.subarray(0, maxBytes - size));
      size = maxBytes;
      stream.destroy();
      return { data: Buffer.concat(chunks, size), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { data: Buffer.concat(chunks, size), truncated: false };
}

/** Number of lines as an editor counts them: "" is 0, "a" and "a\n" are 1. */
export function countLines(text: string): number {
  if (text.length === 0) return 0;
  const newlines = text.split("\n").length - 1;
  return text.endsWith("\n") ? newlines : newlines + 1;
}

/**
 * A unified diff of one hunk spanning everything between the common prefix and suffix lines. Not minimal,
 * but always a correct patch, and linear in the file size (an LCS diff is quadratic).
 */
export function unifiedDiff(filePath: string, before: string, after: string, context = 3): string {
  if (before === after) return "";
  const a = before.split("\n");
  const b = after.split("\n");
  let prefix = 0;
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++;
  let suffix = 0;
  while (
    suffix < a.length - prefix &&
    suffix < b.length - prefix &&
    a[a.length - 1 - suffix] === b[b.length - 1 - suffix]
  ) {
    suffix++;
  }
  const start = Math.max(0, prefix - context);
  const endA = Math.min(a.length, a.length - suffix + context);
  const endB = Math.min(b.length, b.length - suffix + context);
  const lines: string[] = [];
  for (let i = start; i < prefix; i++) lines.push(` ${a[i]}`);
  for (let i = prefix; i < a.length - suffix; i++) lines.push(`-${a[i]}`);
  for (let i = prefix; i < b.length - suffix; i++) lines.push(`+${b[i]}`);
  for (let i = a.length - suffix; i < endA; i++) lines.push(` ${a[i]}`);
  const countA = endA - start;
  const countB = endB - start;
  const header = `@@ -${start + (countA > 0 ? 1 : 0)},${countA} +${start + (countB > 0 ? 1 : 0)},${countB} @@`;
  return [`--- ${filePath}`, `+++ ${filePath}`, header, ...lines].join("\n") + "\n";
}
