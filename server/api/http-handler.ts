import { TRPCError } from "@trpc/server";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { type ApiRuntime, createContextInner } from "@/server/api/context";
import {
  closeConnectionIfRefused,
  limitRequestBody,
  TRPC_REQUEST_LIMITS,
  type TrpcRequestLimits,
} from "@/server/api/request-limits";
import { appRouter } from "@/server/api/root";

export const TRPC_ENDPOINT = "/api/trpc";

/**
 * Serves the tRPC API for one Fetch `Request` (the Next route handler and the HTTP tests both use
 * this). The request id is set on the response by the context.
 */
export async function handleTrpcRequest(
  req: Request,
  runtime: ApiRuntime,
  limits: TrpcRequestLimits = TRPC_REQUEST_LIMITS,
): Promise<Response> {
  const bounded = limitRequestBody(req, limits.maxBodyBytes, () => payloadTooLarge(limits.maxBodyBytes));
  const response = await fetchRequestHandler({
    endpoint: TRPC_ENDPOINT,
    req: bounded.request,
    router: appRouter,
    maxBatchSize: limits.maxBatchSize,
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
  return closeConnectionIfRefused(response, bounded.refused());
}

function payloadTooLarge(maxBodyBytes: number): TRPCError {
  return new TRPCError({
    code: "PAYLOAD_TOO_LARGE",
    message: `The request body is larger than ${maxBodyBytes} bytes.`,
  });
}
