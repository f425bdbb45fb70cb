import { toNextJsHandler } from "better-auth/next-js";
import { processBerth } from "@/server/composition/process-berth";
import { isPublicAuthEndpoint } from "@/server/auth/public-endpoints";

export const dynamic = "force-dynamic";

// Built on first request, not at import: `next build` evaluates route modules without a database.
function handle(req: Request): Promise<Response> {
  if (!isPublicAuthEndpoint(new URL(req.url).pathname)) {
    return Promise.resolve(Response.json({ error: "NOT_FOUND" }, { status: 404 }));
  }
  // Sign-in attempts go through the per-address and per-account throttle (server/auth/sign-in-guard.ts).
  const { signInGuard, auth } = processBerth().api;
  return signInGuard.handle(req, (request) => auth.handler(request));
}

const { GET, POST, PATCH, PUT, DELETE } = toNextJsHandler(handle);
export { DELETE, GET, PATCH, POST, PUT };
