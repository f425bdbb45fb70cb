import { TRPCError } from "@trpc/server";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { type ApiRuntime, createContextInner } from "@/server/api/context";
import { toClientSafeTRPCError } from "@/server/api/error-mapping";
import { assertSameOriginRequest } from "@/server/api/request-origin";
import {
  closeConnectionIfRefused,
  limitRequestBody,
  TRPC_REQUEST_LIMITS,
  type TrpcRequestLimits,
} from "@/server/api/request-limits";
import { appRouter } from "@/server/api/root";
import { requestMetaOf, runWithRequestMeta } from "@/server/shared/request-meta";

const TRPC_ENDPOINT = "/api/trpc";

/**
 * Serves the tRPC API for one Fetch `Request` (the Next route handler and the HTTP tests both use
 * this). The request id is set on the response by the context. Cross-site cookie-authenticated POSTs are
 * refused here, before the context exists (see server/api/request-origin.ts).
 */
export function handleTrpcRequest(
  req: Request,
  runtime: ApiRuntime,
  limits: TrpcRequestLimits = TRPC_REQUEST_LIMITS,
): Promise<Response> {
  // The client's address and user agent reach the audit log through the request's async context.
  return runWithRequestMeta(requestMetaOf(req.headers), () => serve(req, runtime, limits));
}

async function serve(req: Request, runtime: ApiRuntime, limits: TrpcRequestLimits): Promise<Response> {
  const bounded = limitRequestBody(req, limits.maxBodyBytes, () => payloadTooLarge(limits.maxBodyBytes));
  const response = await fetchRequestHandler({
    endpoint: TRPC_ENDPOINT,
    req: bounded.request,
    router: appRouter,
    maxBatchSize: limits.maxBatchSize,
    createContext: ({ resHeaders, info }) => {
      // Before any procedure: a cross-site cookie POST gets a typed 403 (FORBIDDEN, appError.details.reason).
      try {
        assertSameOriginRequest(req, runtime.origins);
      } catch (error) {
        throw toClientSafeTRPCError(new TRPCError({ code: "INTERNAL_SERVER_ERROR", cause: error }));
      }
      return createContextInner({
        runtime,
        headers: req.headers,
        resHeaders,
        streamingResponse: info.accept === "application/jsonl",
      });
    },
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
