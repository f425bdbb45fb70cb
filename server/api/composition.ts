/**
 * Composition root of the web app's server side: builds the logger, database client and auth from
 * the environment ONCE per process and hands them to the tRPC context and the auth route handler.
 */
import { type ApiRuntime } from "@/server/api/context";
import { type BerthAuth, createAuth } from "@/server/auth/auth";
import { createSignInGuard, type SignInGuard } from "@/server/auth/sign-in-guard";
import { getConfig } from "@/server/config/config";
import { getDb } from "@/server/db";
import { getLogger } from "@/server/logger";
import { recordAudit } from "@/server/modules/audit/audit-buffer.service";
import { getRedis } from "@/server/redis";
import { processSlot } from "@/server/shared/process-registry";

export type ApiComposition = {
  runtime: ApiRuntime;
  auth: BerthAuth;
};

// Once per process, whichever copy of this module asks (Next's bundle, the start script, dev reloads).
const apiSlot = processSlot<ApiComposition>("api");
const signInGuardSlot = processSlot<SignInGuard>("sign-in-guard");

function buildApiComposition(): ApiComposition {
  const config = getConfig();
  const logger = getLogger().child({ component: "api" });
  const authLog = logger.child({ component: "better-auth" });
  const trustedOrigins = loopbackAliases(config.http.baseUrl);
  const auth = createAuth({
    secret: config.secrets.authSecret,
    baseUrl: config.http.baseUrl,
    trustedOrigins,
    prisma: getDb(),
    // Wrong passwords and rejected keys are client mistakes that better-auth logs as errors.
    log: (level, message, ...args) => authLog[level === "error" ? "warn" : level]({ args }, message),
  });
  const origins = { allowedOrigins: [new URL(config.http.baseUrl).origin, ...trustedOrigins] };
  return { runtime: { logger, auth, origins }, auth };
}

/**
 * A local install is opened as localhost or 127.0.0.1 interchangeably; trust both for cookie sign-in
 * (better-auth rejects a POST whose Origin is not trusted). Other base URLs get nothing extra.
 */
export function loopbackAliases(baseUrl: string): string[] {
  const url = new URL(baseUrl);
  const loopbackHosts = ["localhost", "127.0.0.1"];
  if (!loopbackHosts.includes(url.hostname)) return [];
  const port = url.port ? `:${url.port}` : "";
  return loopbackHosts
    .filter((host) => host !== url.hostname)
    .map((host) => `${url.protocol}//${host}${port}`);
}

export function getApiComposition(): ApiComposition {
  return apiSlot.get(buildApiComposition);
}

/** The sign-in throttle of this process (Redis-backed, so every replica counts the same failures). */
export function getSignInGuard(): SignInGuard {
  return signInGuardSlot.get(() =>
    createSignInGuard({
      redis: getRedis(),
      redisPrefix: getConfig().redis.prefix,
      recordAudit: (scope, entry) => recordAudit(scope, entry),
      log: getApiComposition().runtime.logger.child({ component: "sign-in-guard" }),
    }),
  );
}
