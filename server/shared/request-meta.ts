import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Who is on the other end of the HTTP request being served (client address and user agent), for the audit
 * log. The transport runs each request inside `runWithRequestMeta` (server/api/http-handler.ts, the route
 * handlers), so services record it without threading it through every signature; work started by the
 * request (a chat turn that ends later) keeps it through async continuations. Absent for jobs and tests.
 */
export type RequestMeta = { readonly ip: string | null; readonly userAgent: string | null };

/**
 * One store per process, not per copy of this module. Under `npm start` the request is entered by Next's
 * copy (its route handlers) while the services that audit it are the root's, loaded through tsx
 * (server/shared/process-root.ts): with a store per copy, every audit entry written by those services
 * (session.create, agent.create, workspace.*, chat.*, jobs.retry, uploads) lost its address and user agent.
 * `Symbol.for` gives both copies the same key. It is request context, not composition: it holds no
 * instance of the root (that is the one process handle's job).
 */
const STORAGE_KEY = Symbol.for("berth.request-meta");
const holder = globalThis as { [STORAGE_KEY]?: AsyncLocalStorage<RequestMeta> };
const storage = (holder[STORAGE_KEY] ??= new AsyncLocalStorage<RequestMeta>());

/**
 * The client address of a request: `x-forwarded-for`, which the HTTP server of `npm start` (scripts/start.ts)
 * always overwrites with the one address it trusts (the socket's peer, or the client a configured proxy
 * forwarded for, see server/api/client-address.ts). Elsewhere it is whatever the caller sent.
 */
export function requestMetaOf(headers: Headers): RequestMeta {
  return requestMetaFrom(headers.get("x-forwarded-for"), headers.get("user-agent"));
}

/** The same from the header values themselves (Node's IncomingMessage, before there is a Fetch Request). */
export function requestMetaFrom(
  forwardedFor: string | null | undefined,
  userAgent: string | null | undefined,
): RequestMeta {
  const forwarded = forwardedFor?.split(",")[0]?.trim();
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
