import { randomUUID } from "node:crypto";
import { type OriginPolicy } from "@/server/api/request-origin";
import { type BerthAuth } from "@/server/auth/auth";
import { type RequestPrincipal } from "@/server/auth/resolve";
import type { Berth } from "@/server/composition/berth";
import { type Logger } from "@/server/logger";

export const REQUEST_ID_HEADER = "x-request-id";

// A caller-supplied id is echoed back only when it is short and plain, so it is safe to log and to
// put in a response header; anything else gets a fresh id.
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function resolveRequestId(headers: Headers): string {
  const supplied = headers.get(REQUEST_ID_HEADER);
  return supplied !== null && SAFE_REQUEST_ID.test(supplied) ? supplied : randomUUID();
}

/** What the tRPC transport needs from the process: its Berth root and the root's API parts (server/api/composition.ts). */
export type ApiRuntime = {
  berth: Berth;
  logger: Logger;
  auth: BerthAuth;
  /** Origins whose cookie-authenticated POSTs are accepted (CSRF check, server/api/request-origin.ts). */
  origins: OriginPolicy;
};

export type ApiContext = {
  requestId: string;
  headers: Headers;
  /** Response headers of the HTTP request, or null for in-process callers (tests, server components). */
  resHeaders: Headers | null;
  runtime: ApiRuntime;
  /** The process' Berth root: procedures take their services from it. */
  berth: Berth;
  log: Logger;
  /**
   * Who is calling. `undefined` means "not resolved yet" (resolved lazily from the headers by the
   * authed middleware, so public procedures cost no auth lookup); `null` means anonymous.
   */
  principal: RequestPrincipal | null | undefined;
  /**
   * Whether the HTTP response can stream (`trpc-accept: application/jsonl`, what httpBatchStreamLink sends);
   * null for in-process callers. A streamed mutation (chat.send) checks it BEFORE it starts work, so a
   * client on the non-streaming link gets a clear 400 instead of a turn it cannot read.
   */
  streamingResponse: boolean | null;
};

export type CreateContextInnerOptions = {
  runtime: ApiRuntime;
  headers?: Headers;
  resHeaders?: Headers | null;
  /** Pre-resolved caller for tests; omit to resolve from `headers` (cookie or Bearer API key). */
  principal?: RequestPrincipal | null;
  streamingResponse?: boolean | null;
};

/** Builds a context without an HTTP request: what tests and server-side callers use. */
export function createContextInner(options: CreateContextInnerOptions): ApiContext {
  const headers = options.headers ?? new Headers();
  const requestId = resolveRequestId(headers);
  const resHeaders = options.resHeaders ?? null;
  resHeaders?.set(REQUEST_ID_HEADER, requestId);
  return {
    requestId,
    headers,
    resHeaders,
    runtime: options.runtime,
    berth: options.runtime.berth,
    log: options.runtime.logger.child({ requestId }),
    principal: options.principal,
    streamingResponse: options.streamingResponse ?? null,
  };
}
