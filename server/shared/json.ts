/**
 * JSON text from outside this process (a Redis buffer line, a socket message, a file another process wrote),
 * parsed, or null where it is not JSON: callers check the shape with zod next, so unreadable text and a
 * wrong shape take the same path.
 */
export function parseJsonOrNull(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
