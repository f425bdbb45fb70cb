import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { getApiComposition } from "@/server/api/composition";
import { createContextInner } from "@/server/api/context";
import { appRouter } from "@/server/api/root";

export const dynamic = "force-dynamic";

function handler(req: Request): Promise<Response> {
  const { runtime } = getApiComposition();
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
    createContext: ({ resHeaders }) => createContextInner({ runtime, headers: req.headers, resHeaders }),
    onError({ error, path }) {
      // Procedure errors are logged by the tRPC middleware with their request id; this catches the rest
      // (malformed batches, unknown paths, a context that failed to build).
      if (path === undefined || error.code === "NOT_FOUND" || error.code === "PARSE_ERROR") {
        runtime.logger.warn(
          { path, code: error.code, err: error },
          "trpc request rejected before a procedure ran",
        );
      }
    },
  });
}

export { handler as GET, handler as POST };
