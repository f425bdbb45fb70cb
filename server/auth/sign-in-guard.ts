import type { Db } from "@/server/db";
import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { findUserTenantsByEmailForGate } from "@/server/auth/gate.data";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import type { TAuditEntryInput } from "@/server/modules/audit/audit.types";
import { requestMetaOf } from "@/server/shared/request-meta";

/**
 * Brute-force protection around `POST /api/auth/sign-in/email`, shared by every API process (Redis):
 * - per client address (what server/api/client-address.ts resolved: never a client-chosen header) and
 * - per account (the email, hashed), so spreading guesses over many addresses does not help either.
 * Failed attempts count in a sliding-expiry window; past a limit the request is refused with 429 and a
 * Retry-After BEFORE the password is checked. A successful sign-in clears the account's counter. Every
 * failed or refused attempt is written to the audit log of each tenant the account belongs to, with the
 * client address and user agent (an unknown email has no tenant: it is only logged).
 */
export type SignInGuardLimits = {
  maxFailuresPerAddress: number;
  maxFailuresPerAccount: number;
  windowSeconds: number;
};

export const DEFAULT_SIGN_IN_LIMITS: SignInGuardLimits = {
  maxFailuresPerAddress: 20,
  maxFailuresPerAccount: 10,
  windowSeconds: 15 * 60,
};

export type SignInGuardDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  redis: Redis;
  redisPrefix: string;
  limits?: SignInGuardLimits;
  recordAudit: (scope: TenantScope, entry: TAuditEntryInput) => Promise<unknown>;
  log: { warn(fields: object, message: string): void };
};

const SIGN_IN_PATH = "/api/auth/sign-in/email";

export function createSignInGuard(deps: SignInGuardDeps) {
  const { db } = deps;
  const limits = deps.limits ?? DEFAULT_SIGN_IN_LIMITS;
  const key = (kind: "addr" | "acct", value: string) =>
    [deps.redisPrefix, "sign-in-failures", kind, createHash("sha256").update(value).digest("hex")].join(":");

  async function failures(keys: string[]): Promise<{ count: number; ttl: number }[]> {
    const pipeline = deps.redis.pipeline();
    for (const k of keys) pipeline.get(k).ttl(k);
    const results = (await pipeline.exec()) ?? [];
    return keys.map((_, i) => ({
      count: Number(results[i * 2]?.[1] ?? 0),
      ttl: Number(results[i * 2 + 1]?.[1] ?? -1),
    }));
  }

  async function countFailure(keys: string[]): Promise<void> {
    const pipeline = deps.redis.pipeline();
    for (const k of keys) pipeline.incr(k).expire(k, limits.windowSeconds);
    await pipeline.exec();
  }

  async function audit(email: string, request: Request, reason: "invalid_credentials" | "throttled") {
    const account = await findUserTenantsByEmailForGate(email, db);
    const meta = requestMetaOf(request.headers);
    if (!account || account.tenantIds.length === 0) {
      deps.log.warn({ reason, ip: meta.ip }, "sign-in failed for an email without a tenant");
      return;
    }
    for (const tenantId of account.tenantIds) {
      const scope = await resolveSystemTenantScope(tenantId, { allowSuspended: true }, db);
      await deps.recordAudit(scope, {
        action: "auth.sign-in",
        targetType: "user",
        targetId: account.userId,
        outcome: "failure",
        actor: { type: "user", id: account.userId },
        ip: meta.ip,
        userAgent: meta.userAgent,
        details: { reason },
      });
    }
  }

  return {
    /** Runs `signIn` (better-auth's handler) for a sign-in request, or refuses it; other requests pass. */
    async handle(request: Request, signIn: (request: Request) => Promise<Response>): Promise<Response> {
      if (request.method !== "POST" || new URL(request.url).pathname !== SIGN_IN_PATH) return signIn(request);
      const body = (await request
        .clone()
        .json()
        .catch(() => null)) as { email?: unknown } | null;
      const email = typeof body?.email === "string" ? body.email.trim().toLowerCase().slice(0, 320) : "";
      const address = requestMetaOf(request.headers).ip ?? "unknown";
      const keys = [key("addr", address), ...(email ? [key("acct", email)] : [])];
      const [byAddress, byAccount] = await failures(keys);
      const throttled =
        (byAddress?.count ?? 0) >= limits.maxFailuresPerAddress ||
        (byAccount?.count ?? 0) >= limits.maxFailuresPerAccount;
      if (throttled) {
        if (email) await audit(email, request, "throttled").catch(logAuditFailure);
        const retryAfter = Math.max(byAddress?.ttl ?? 0, byAccount?.ttl ?? 0, 1);
        return Response.json(
          { code: "TOO_MANY_REQUESTS", message: "Too many failed sign-in attempts. Try again later." },
          { status: 429, headers: { "retry-after": String(retryAfter), "cache-control": "no-store" } },
        );
      }
      const response = await signIn(request);
      if (response.status === 401) {
        await countFailure(keys);
        if (email) await audit(email, request, "invalid_credentials").catch(logAuditFailure);
      } else if (response.status === 429) {
        // better-auth's own short per-address window refused it first: an attempt an admin should see too.
        if (email) await audit(email, request, "throttled").catch(logAuditFailure);
      } else if (response.ok && email) {
        await deps.redis.del(key("acct", email));
      }
      return response;
    },
  };

  function logAuditFailure(error: unknown) {
    deps.log.warn({ err: error }, "could not audit a failed sign-in");
  }
}

export type SignInGuard = ReturnType<typeof createSignInGuard>;
