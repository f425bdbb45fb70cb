/**
 * Where the sign-in page may send the browser afterwards: only a path on this origin. Browsers treat `\` as
 * `/` and drop tabs and newlines anywhere in a URL, so `/\evil.example` and `/%09/evil.example` are
 * `//evil.example` (another host) to them; anything but a plain same-origin path becomes `/`.
 */
const PROBE_ORIGIN = "http://berth.invalid";

export function safeNextPath(value: unknown): string {
  if (typeof value !== "string" || value.length === 0 || value.length > 2000) return "/";
  // Backslashes and C0 controls/space/DEL are never part of a path Berth links to.
  if (!value.startsWith("/") || /[\\\u0000-\u0020\u007f]/.test(value)) return "/";
  let url: URL;
  try {
    url = new URL(value, PROBE_ORIGIN);
  } catch {
    return "/";
  }
  if (url.origin !== PROBE_ORIGIN || url.pathname.startsWith("//")) return "/";
  return `${url.pathname}${url.search}${url.hash}`;
}
