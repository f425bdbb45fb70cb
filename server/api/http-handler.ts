import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { type ApiRuntime, createContextInner } from "@/server/api/context";
import { appRouter } from "@/server/api/root";

export const TRPC_ENDPOINT = "/api/trpc";

/**
 * Serves the tRPC API for one Fetch `Request` (the Next route handler and the HTTP tests both use
 * this). The request id is set on the response by the context.
 */
export function handleTrpcRequest(req: Request, runtime: ApiRuntime): Promise<Response> {
  return fetchRequestHandler({
    endpoint: TRPC_ENDPOINT,
    req,
    router: appRouter,
    createContext: ({ resHeaders }) => createContextInner({ runtime, headers: req.headers, resHeaders }),
    onError({ error, path, ctx }) {
      // Procedure errors are logged by the tRPC middleware with their request id; this catches what
      // fails before a procedure runs (malformed batches, unknown paths, a context that did not build).
      if (ctx === undefined || path === undefined) {
        runtime.logger.warn(
          { path, code: error.code, err: error },
          "trpc request rejected before a procedure ran",
        );
      }
    },
  });
}
