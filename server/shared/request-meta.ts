import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Who is on the other end of the HTTP request being served (client address and user agent), for the audit
 * log. The transport runs each request inside `runWithRequestMeta` (server/api/http-handler.ts, the route
 * handlers), so services record it without threading it through every signature; work started by the
 * request (a chat turn that ends later) keeps it through async continuations. Absent for jobs and tests.
 */
export type RequestMeta = { readonly ip: string | null; readonly userAgent: string | null };

const storage = new AsyncLocalStorage<RequestMeta>();

/**
 * The client address of a request: `x-forwarded-for`, which the HTTP server of `npm start` (scripts/start.ts)
 * always overwrites with the one address it trusts (the socket's peer, or the client a configured proxy
 * forwarded for, see server/api/client-address.ts). Elsewhere it is whatever the caller sent.
 */
export function requestMetaOf(headers: Headers): RequestMeta {
  const forwarded = headers.get("x-forwarded-for")?.split(",")[0]?.trim();
  const userAgent = headers.get("user-agent");
  return {
    ip: forwarded ? forwarded.slice(0, 100) : null,
    userAgent: userAgent ? userAgent.slice(0, 500) : null,
  };
}

export function runWithRequestMeta<T>(meta: RequestMeta, fn: () => T): T {
  return storage.run(meta, fn);
}

export function currentRequestMeta(): RequestMeta | undefined {
  return storage.getStore();
}
