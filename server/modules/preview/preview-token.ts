import { createHmac, hkdfSync, timingSafeEqual } from "node:crypto";

/**
 * Share links of preview URLs: `<expiresAt seconds>.<HMAC-SHA256 over (workspaceId, port, expiresAt)>`, keyed
 * by a key derived from the installation's auth secret under its own HKDF info (so it shares no key
 * material with cookies or sealed secrets). Nothing is stored: a link is valid until it expires, and only
 * while its port stays exposed (the proxy checks the preview row on every request).
 */
export const MAX_SHARE_TTL_MS = 24 * 60 * 60 * 1000;
export const DEFAULT_SHARE_TTL_MS = 60 * 60 * 1000;

export type PreviewTarget = { workspaceId: string; port: number };
export type PreviewShareKey = Buffer & { readonly __brand: "PreviewShareKey" };

export function previewShareKey(authSecret: string): PreviewShareKey {
  return Buffer.from(
    hkdfSync("sha256", authSecret, "berth", "berth:preview-share:v1", 32),
  ) as PreviewShareKey;
}

function mac(key: PreviewShareKey, target: PreviewTarget, expiresAtSeconds: number): string {
  // Length-free framing is safe: the id never holds "\n" (ids are checked at the route), port and time are digits.
  return createHmac("sha256", key)
    .update(`${target.workspaceId}\n${target.port}\n${expiresAtSeconds}`)
    .digest("base64url");
}

export function signPreviewToken(key: PreviewShareKey, target: PreviewTarget, expiresAt: Date): string {
  const seconds = Math.floor(expiresAt.getTime() / 1000);
  return `${seconds}.${mac(key, target, seconds)}`;
}

/** The token's expiry when it is this target's, untampered and not expired (nor beyond the maximum); else null. */
export function verifyPreviewToken(
  key: PreviewShareKey,
  target: PreviewTarget,
  token: string,
  now: Date = new Date(),
): Date | null {
  const match = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!match) return null;
  const seconds = Number(match[1]);
  const expected = Buffer.from(mac(key, target, seconds));
  const given = Buffer.from(match[2]!);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
  const expiresAt = new Date(seconds * 1000);
  // A link signed for longer than the maximum (an old key's, a clock gone wrong) is not honoured past it.
  if (expiresAt <= now || expiresAt.getTime() - now.getTime() > MAX_SHARE_TTL_MS + 60_000) return null;
  return expiresAt;
}
