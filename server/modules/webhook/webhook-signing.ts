import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Delivery signatures: `Berth-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`. The
 * timestamp is signed with the body, so a receiver that refuses old timestamps (5 minutes is the usual
 * tolerance) cannot be replayed against; `verifyWebhookSignature` is what a receiver does.
 */
export const SIGNATURE_HEADER = "berth-signature";

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

function hmac(secret: string, timestamp: number, body: string): string {
  return createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex");
}

export function signWebhookBody(secret: string, body: string, timestamp: number): string {
  return `t=${timestamp},v1=${hmac(secret, timestamp, body)}`;
}

/** True when `header` signs `body` with `secret` and its timestamp is within `toleranceSeconds` of now. */
export function verifyWebhookSignature(
  secret: string,
  body: string,
  header: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): boolean {
  const parts = new Map(header.split(",").map((part) => part.split("=", 2) as [string, string]));
  const timestamp = Number(parts.get("t"));
  const signature = parts.get("v1") ?? "";
  if (!Number.isInteger(timestamp) || !/^[0-9a-f]{64}$/.test(signature)) return false;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > (options.toleranceSeconds ?? 300)) return false;
  return timingSafeEqual(Buffer.from(signature, "hex"), Buffer.from(hmac(secret, timestamp, body), "hex"));
}
