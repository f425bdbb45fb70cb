/**
 * The better-auth endpoints Berth exposes over HTTP. better-auth mounts many more (sign-up, organization
 * and API-key management, ...); those would bypass our tenancy rules, audit log and "last owner" guard,
 * and sign-up would let anyone mint users. Tenants, members and keys are managed through tRPC only, and so
 * is changing a password (`account.changePassword`, which always ends the user's other sessions; the raw
 * endpoint would let a caller keep them).
 */
const PUBLIC_AUTH_ENDPOINTS = new Set([
  "/sign-in/email",
  "/sign-out",
  "/get-session",
  "/list-sessions",
  "/revoke-session",
  "/revoke-other-sessions",
]);

/** `basePath` is where the auth handler is mounted (`/api/auth`). */
export function isPublicAuthEndpoint(pathname: string, basePath = "/api/auth"): boolean {
  if (!pathname.startsWith(`${basePath}/`)) return false;
  const endpoint = pathname.slice(basePath.length).replace(/\/+$/, "");
  return PUBLIC_AUTH_ENDPOINTS.has(endpoint);
}
