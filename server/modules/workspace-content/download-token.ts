import { createHmac, timingSafeEqual } from "node:crypto";
import { AppError } from "@/server/shared/errors";

/**
 * Short-lived signed download links (the reference's `_download_token.py`, scoped by tenant and workspace
 * instead of user): `<expiresAtMs>.<b64url(tenantId)>.<b64url(HMAC-SHA256(key, exp\0tenant\0workspace\0path))>`.
 * The route verifies it against the REQUEST's workspace and path, so a token opens exactly one file.
 */
export function signDownloadToken(
  key: Buffer,
  input: { tenantId: string; workspaceId: string; path: string; expiresAt: number },
): string {
  const tenant = Buffer.from(input.tenantId, "utf8").toString("base64url");
  return `${input.expiresAt}.${tenant}.${mac(key, input.expiresAt, input.tenantId, input.workspaceId, input.path)}`;
}

/** The token's tenant when it is valid for this workspace and path now; UNAUTHORIZED otherwise. */
export function verifyDownloadToken(
  key: Buffer,
  token: string,
  request: { workspaceId: string; path: string },
  now = Date.now(),
): { tenantId: string } {
  const parts = token.split(".");
  const [exp, tenant, signature] = parts;
  if (parts.length !== 3 || !exp || !tenant || !signature || !/^\d{1,16}$/.test(exp)) {
    throw unauthorized("Malformed download token.");
  }
  const expiresAt = Number(exp);
  const tenantId = Buffer.from(tenant, "base64url").toString("utf8");
  const expected = Buffer.from(mac(key, expiresAt, tenantId, request.workspaceId, request.path));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw unauthorized("Invalid download token.");
  }
  if (now > expiresAt) throw unauthorized("Expired download token.");
  return { tenantId };
}

function mac(key: Buffer, expiresAt: number, tenantId: string, workspaceId: string, path: string): string {
  return createHmac("sha256", key)
    .update(`${expiresAt}\0${tenantId}\0${workspaceId}\0${path}`, "utf8")
    .digest("base64url");
}

function unauthorized(message: string): AppError {
  return new AppError("UNAUTHORIZED", message, { userMessage: message });
}
