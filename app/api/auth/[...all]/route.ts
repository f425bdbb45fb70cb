import { toNextJsHandler } from "better-auth/next-js";
import { getApiComposition } from "@/server/api/composition";

export const dynamic = "force-dynamic";

// Built on first request, not at import: `next build` evaluates route modules without a database.
function handle(req: Request): Promise<Response> {
  return getApiComposition().auth.handler(req);
}

const { GET, POST, PATCH, PUT, DELETE } = toNextJsHandler(handle);
export { DELETE, GET, PATCH, POST, PUT };
