import { AppError } from "@/server/shared/errors";

/**
 * Cross-site request forgery protection for cookie-authenticated calls, from Fetch Metadata and Origin (as Go's
 * `http.CrossOriginProtection` does): a browser sends `Sec-Fetch-Site` (all current ones) or at least `Origin`
 * with every non-GET request, and a page on another origin cannot suppress or forge either. So:
 * - safe methods (GET, HEAD, OPTIONS) pass: nothing that changes state may run on them (tRPC mutations are
 *   POST only, and chat.send is a mutation);
 * - `Authorization: Bearer` requests pass: a browser never attaches that header cross-site by itself, and a
 *   Bearer header wins over the cookie (server/auth/resolve.ts), so the cookie is not what authenticates them;
 * - `Sec-Fetch-Site: same-origin` (or `none`, typed in the address bar) passes, any other value is refused;
 * - without it, an `Origin` must be one of the allowed origins (the base URL and its loopback aliases);
 * - with neither header the caller is not a browser (curl, a script) and cannot be a CSRF victim.
 */
export type OriginPolicy = { allowedOrigins: readonly string[] };

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export function crossOriginRefusal(
  request: { method: string; headers: Headers },
  policy: OriginPolicy,
): string | null {
  if (SAFE_METHODS.has(request.method.toUpperCase())) return null;
  if (/^Bearer\s/i.test(request.headers.get("authorization") ?? "")) return null;
  const fetchSite = request.headers.get("sec-fetch-site");
  if (fetchSite !== null) {
    return fetchSite === "same-origin" || fetchSite === "none" ? null : `Sec-Fetch-Site is ${fetchSite}`;
  }
  const origin = request.headers.get("origin");
  if (origin === null) return null;
  return policy.allowedOrigins.includes(origin) ? null : `Origin ${origin} is not allowed`;
}

/** Throws FORBIDDEN (a typed 403) for a cross-site state-changing request; see `crossOriginRefusal`. */
export function assertSameOriginRequest(
  request: { method: string; headers: Headers },
  policy: OriginPolicy,
): void {
  const refusal = crossOriginRefusal(request, policy);
  if (refusal === null) return;
  throw new AppError("FORBIDDEN", `cross-origin request refused: ${refusal}`, {
    userMessage: "Cross-site requests are not allowed. Use Berth's own pages or an API key.",
    details: { reason: "cross_origin" },
  });
}

/**
 * A WebSocket upgrade (a GET) authenticated by the session cookie must come from one of Berth's own
 * origins: browsers attach cookies to cross-site WebSocket handshakes and WebSockets have no CORS, so the
 * Origin header (which every browser sends on a handshake and no page can forge) is required and checked.
 * Bearer-authenticated upgrades pass (no browser adds that header by itself).
 */
export function assertSameOriginUpgrade(headers: Headers, policy: OriginPolicy): void {
  if (/^Bearer\s/i.test(headers.get("authorization") ?? "")) return;
  const origin = headers.get("origin");
  if (origin !== null && policy.allowedOrigins.includes(origin)) return;
  throw new AppError("FORBIDDEN", `cross-origin upgrade refused: Origin ${origin ?? "missing"}`, {
    userMessage: "Terminals open only from Berth's own pages (or with an API key).",
    details: { reason: "cross_origin" },
  });
}
