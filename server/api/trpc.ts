/**
 * The tRPC transport, in the order a request meets it: init (superjson, error shape) → middlewares
 * (error mapping, logging, auth, tenant scope, roles) → the procedure builders routers use.
 * Domain code never imports this file; routers call services and let AppErrors bubble up here.
 */
import { getTRPCErrorFromUnknown, initTRPC, TRPCError } from "@trpc/server";
import superjson from "superjson";
import { z, ZodError } from "zod";
import { type ApiContext } from "@/server/api/context";
import {
  describeValidationError,
  isRetryableErrorCode,
  isServerErrorCode,
  toClientSafeTRPCError,
} from "@/server/api/error-mapping";
import { assertCan, type TenantAction } from "@/server/auth/policy";
import { resolveRequestPrincipal, resolveTenantScope } from "@/server/auth/resolve";
import { isRoleAtLeast } from "@/server/auth/roles";
import { isAppError } from "@/server/shared/errors";
import { redactHostPaths, redactHostPathsDeep } from "@/server/shared/host-paths";
import { assertNoUnsafeStrings } from "@/server/shared/unsafe-strings";

const t = initTRPC.context<ApiContext>().create({
  transformer: superjson,
  // Subscriptions (SSE): a ping keeps proxies from closing a quiet stream, and a client that hears nothing
  // for longer (a replica gone without a FIN) reconnects.
  sse: { ping: { enabled: true, intervalMs: 15_000 }, client: { reconnectAfterInactivityMs: 40_000 } },
  errorFormatter({ shape, error, ctx }) {
    const zodError = validationErrorOf(error);
    const validation = zodError ? describeValidationError(zodError) : null;
    const appError = isAppError(error.cause) && !isServerErrorCode(error.code) ? error.cause : null;
    // Stack traces never leave the server, dev or not.
    const { stack: _stack, ...data } = shape.data;
    return {
      ...shape,
      // One readable line ("name: must be at most 64 characters; …"), never a JSON dump of issues.
      message: redactHostPaths(validation ? validation.message : shape.message),
      data: {
        ...data,
        requestId: ctx?.requestId ?? null,
        /** The same call may succeed later unchanged (503 UNAVAILABLE, 504, 429): the client should retry. */
        retryable: isRetryableErrorCode(error.code),
        /** Messages per field path ("modelConfig.temperature"), for forms. */
        fieldErrors: validation ? validation.fieldErrors : null,
        issues: validation ? validation.issues : null,
        appError: appError
          ? { code: appError.code, details: redactHostPathsDeep(appError.details ?? null) }
          : null,
      },
    };
  },
});

/** The zod error behind a 400: tRPC's own input validation, or a domain `parseInput` (AppError). */
function validationErrorOf(error: TRPCError): ZodError | null {
  if (error.code !== "BAD_REQUEST") return null;
  if (error.cause instanceof ZodError) return error.cause;
  if (isAppError(error.cause) && error.cause.cause instanceof ZodError) return error.cause.cause;
  return null;
}

export const createTRPCRouter = t.router;
export const createCallerFactory = t.createCallerFactory;

/**
 * The ONE place errors become client-visible: AppError → tRPC code, 5xx masked. Also logs each call
 * with its request id. Wraps async-iterable results so errors thrown mid-stream (chat.send) map the same way.
 */
const errorMappingAndLogging = t.middleware(async ({ ctx, path, type, next }) => {
  const startedAt = performance.now();
  const result = await next();
  const durationMs = Math.round(performance.now() - startedAt);
  const reportFailure = (error: TRPCError): TRPCError => {
    const safe = toClientSafeTRPCError(error);
    const logFields = { path, type, durationMs, code: safe.code, err: error.cause ?? error };
    if (isServerErrorCode(safe.code)) ctx.log.error(logFields, "trpc call failed");
    else ctx.log.info(logFields, "trpc call rejected");
    return safe;
  };
  if (!result.ok) return { ...result, error: reportFailure(result.error) };
  ctx.log.debug({ path, type, durationMs }, "trpc call ok");
  if (isAsyncIterable(result.data)) return { ...result, data: mapStreamErrors(result.data, reportFailure) };
  return result;
});

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}

/** A stream that fails after it started goes through the same mapping. */
async function* mapStreamErrors(
  stream: AsyncIterable<unknown>,
  mapError: (error: TRPCError) => TRPCError,
): AsyncGenerator<unknown, void, undefined> {
  try {
    yield* stream;
  } catch (error) {
    throw mapError(getTRPCErrorFromUnknown(error));
  }
}

/**
 * Rejects, before any procedure or auth runs, input holding a string Postgres cannot store (a NUL byte, an
 * unpaired surrogate) or nesting absurdly deep: a 400 naming the field instead of a 500 from the database.
 */
const rejectUnstorableStrings = t.middleware(async ({ getRawInput, next }) => {
  assertNoUnsafeStrings(await getRawInput());
  return next();
});

const baseProcedure = t.procedure.use(errorMappingAndLogging).use(rejectUnstorableStrings);

/** No authentication. Keep these few: health-style reads only. */
export const publicProcedure = baseProcedure;

/** A signed-in user (cookie session) or an API key (Bearer). */
export const authedProcedure = baseProcedure.use(async ({ ctx, next }) => {
  const principal =
    ctx.principal === undefined
      ? await resolveRequestPrincipal(ctx.runtime.auth, ctx.headers, ctx.berth.db)
      : ctx.principal;
  if (!principal) throw new TRPCError({ code: "UNAUTHORIZED", message: "Sign in or send an API key" });
  const who = principal.kind === "user" ? { userId: principal.userId } : { apiKeyId: principal.apiKeyId };
  return next({ ctx: { principal, log: ctx.log.child(who) } });
});

/**
 * Input every tenant procedure extends: the tenant by id or by slug (not both). API-key callers may
 * omit it and get the key's own tenant.
 */
export const ZTenantInput = z.object({
  tenantId: z.string().min(1).max(200).optional(),
  tenantSlug: z.string().min(1).max(200).optional(),
});

// Parsed from the raw input so the tenant gate runs before, and independently of, each procedure's
// own schema (which also extends ZTenantInput, so clients are typed).
const ZRawTenantRef = ZTenantInput.loose();

/**
 * Resolves the tenant from the input or the API key, checks the caller against the database and
 * mints `ctx.scope` through server/auth (not a member, unknown tenant or another tenant's key →
 * FORBIDDEN). It reads the database on every call, so mutations always see current membership.
 */
const tenantProcedure = authedProcedure.use(async ({ ctx, getRawInput, next }) => {
  const parsed = ZRawTenantRef.safeParse((await getRawInput()) ?? {});
  if (!parsed.success) {
    throw new TRPCError({ code: "BAD_REQUEST", message: "Invalid tenant reference", cause: parsed.error });
  }
  const { tenantId, tenantSlug } = parsed.data;
  if (tenantId !== undefined && tenantSlug !== undefined) {
    throw new TRPCError({ code: "BAD_REQUEST", message: "Send tenantId or tenantSlug, not both" });
  }
  const tenantRef =
    tenantId ?? tenantSlug ?? (ctx.principal.kind === "api_key" ? ctx.principal.tenantId : undefined);
  if (tenantRef === undefined) {
    throw new TRPCError({ code: "BAD_REQUEST", message: "tenantId or tenantSlug is required" });
  }
  const scope = await resolveTenantScope(ctx.principal, tenantRef, ctx.berth.db);
  return next({ ctx: { scope, log: ctx.log.child({ tenantId: scope.tenantId }) } });
});

/** Gates a tenant procedure on a policy action (server/auth/policy.ts); viewers never pass a mutation gate. */
export function tenantProcedureFor(action: TenantAction) {
  return tenantProcedure.use(({ ctx, next }) => {
    assertCan(ctx.scope, action);
    return next();
  });
}

/** Tenant administration (API keys, members, audit): admins and owners. */
export const tenantAdminProcedure = tenantProcedure.use(({ ctx, next }) => {
  if (!isRoleAtLeast(ctx.scope.role, "admin")) {
    throw new TRPCError({ code: "FORBIDDEN", message: "This needs the admin role" });
  }
  return next();
});
