import { type ApiRuntime, createContextInner } from "@/server/api/context";
import { type RequestPrincipal } from "@/server/auth/resolve";
import { createAuth } from "@/server/auth/auth";
import { processBerth } from "@/server/composition/process-berth";
import { createLogger } from "@/server/logger";

export const TEST_BASE_URL = "http://localhost:3000";

/** The same runtime the app builds, from explicit test config instead of the process environment. */
export function createTestApiRuntime(): ApiRuntime {
  const berth = processBerth();
  return {
    berth,
    logger: createLogger({ level: "silent" }),
    auth: createAuth({
      secret: "test-secret-0123456789abcdef0123456789abcdef",
      baseUrl: TEST_BASE_URL,
      prisma: berth.db,
      // Rejected keys are the point of several tests; better-auth would log each one as an error.
      log: () => {},
    }),
    origins: { allowedOrigins: [TEST_BASE_URL] },
  };
}

/** A context as an HTTP request with these headers would get (cookie or Bearer key resolved for real). */
export function contextFromHeaders(runtime: ApiRuntime, headers: HeadersInit = {}) {
  return createContextInner({ runtime, headers: new Headers(headers), resHeaders: new Headers() });
}

/** A context with an already-resolved caller, for tests about what happens after authentication. */
export function contextForPrincipal(runtime: ApiRuntime, principal: RequestPrincipal | null) {
  return createContextInner({ runtime, principal, resHeaders: new Headers() });
}
