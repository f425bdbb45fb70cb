import { processApiRuntime } from "@/server/api/composition";
import { assertSameOriginRequest } from "@/server/api/request-origin";
import { assertCan, type TenantAction } from "@/server/auth/policy";
import { resolveRequestPrincipal, resolveTenantScope } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import { toRouteError } from "@/server/api/error-mapping";
import { AppError } from "@/server/shared/errors";
import { assertNoUnsafeStrings } from "@/server/shared/unsafe-strings";

/**
 * Auth for plain route handlers (uploads, downloads), the same gate as tRPC's tenant procedures: cookie or
 * Bearer key → principal; `?tenantId=` / `?tenantSlug=` (or the key's own tenant) → scope; then the role gate.
 * A cross-site cookie-authenticated POST is refused first (403, server/api/request-origin.ts).
 */
export async function routeTenantScope(request: Request, action: TenantAction): Promise<TenantScope> {
  // Route handlers are entered by Next, so they reach the process' Berth through its one handle.
  const runtime = processApiRuntime();
  assertSameOriginRequest(request, runtime.origins);
  const principal = await resolveRequestPrincipal(runtime.auth, request.headers, runtime.berth.db);
  if (!principal)
    throw new AppError("UNAUTHORIZED", "no credentials", { userMessage: "Sign in or send an API key" });
  const url = new URL(request.url);
  const tenantRef =
    url.searchParams.get("tenantId") ??
    url.searchParams.get("tenantSlug") ??
    (principal.kind === "api_key" ? principal.tenantId : null);
  if (!tenantRef)
    throw new AppError("BAD_REQUEST", "tenant missing", {
      userMessage: "tenantId or tenantSlug is required",
    });
  const scope = await resolveTenantScope(principal, tenantRef, runtime.berth.db);
  assertCan(scope, action);
  return scope;
}

/** One error shape for route handlers: `{ error: { code, message, details? } }` with the AppError's status; 5xx masked. */
export function routeErrorResponse(error: unknown): Response {
  const { status, body } = toRouteError(error);
  if (status >= 500) processApiRuntime().logger.error({ err: error }, "route handler failed");
  return Response.json(body, { status, headers: { "cache-control": "no-store" } });
}

/**
 * Route handlers' boundary check, the counterpart of the tRPC input middleware: every query parameter and
 * path parameter must be a storable string (no NUL, no unpaired surrogate) of at most 4096 characters.
 */
export function assertRouteInput(request: Request, params: Record<string, string>): void {
  const url = new URL(request.url);
  const values: Record<string, string> = { ...params };
  for (const [name, value] of url.searchParams) values[name] = value;
  for (const [name, value] of Object.entries(values)) {
    if (value.length > MAX_ROUTE_PARAM_LENGTH)
      throw new AppError("BAD_REQUEST", `${name} is ${value.length} characters`, {
        userMessage: `${name}: must be at most ${MAX_ROUTE_PARAM_LENGTH} characters`,
      });
  }
  assertNoUnsafeStrings(values);
}

const MAX_ROUTE_PARAM_LENGTH = 4096;
