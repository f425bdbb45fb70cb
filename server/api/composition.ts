/**
 * Composition root of the web app's server side: builds the logger, database client and auth from
 * the environment ONCE per process and hands them to the tRPC context and the auth route handler.
 */
import { type ApiRuntime } from "@/server/api/context";
import { type BerthAuth, createAuth } from "@/server/auth/auth";
import { getConfig } from "@/server/config/config";
import { getDb } from "@/server/db";
import { getLogger } from "@/server/logger";

export type ApiComposition = {
  runtime: ApiRuntime;
  auth: BerthAuth;
};

// On globalThis so Next's dev-mode module reloading reuses one auth instance and one DB pool.
const globalForApi = globalThis as unknown as { berthApiComposition?: ApiComposition };

export function buildApiComposition(): ApiComposition {
  const config = getConfig();
  const logger = getLogger().child({ component: "api" });
  const auth = createAuth({
    secret: config.secrets.authSecret,
    baseUrl: config.http.baseUrl,
    prisma: getDb(),
  });
  return { runtime: { logger, auth }, auth };
}

export function getApiComposition(): ApiComposition {
  return (globalForApi.berthApiComposition ??= buildApiComposition());
}
