/**
 * The typed Node client for Berth's API: `createBerthClient({ url, apiKey })` returns a tRPC proxy
 * whose procedures and types are exactly the server's `AppRouter` (queries and mutations over one
 * batched HTTP link, subscriptions over SSE).
 */
import {
  createTRPCClient,
  httpBatchLink,
  httpSubscriptionLink,
  splitLink,
  type TRPCClient,
} from "@trpc/client";
import { EventSource } from "eventsource";
import superjson from "superjson";
import { TRPC_REQUEST_LIMITS } from "@/server/api/request-limits";
import type { AppRouter } from "@/server/api/root";

export const TRPC_ENDPOINT_PATH = "/api/trpc";

export type BerthClientOptions = {
  /** Berth's base URL (`http://localhost:3000`) or the tRPC endpoint itself (`…/api/trpc`). */
  url: string;
  /** A tenant API key, sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** Extra headers for every call, e.g. `x-request-id` for tracing. */
  headers?: Record<string, string>;
};

export type BerthClient = TRPCClient<AppRouter>;

export function resolveTrpcEndpoint(url: string): string {
  const trimmed = url.replace(/\/+$/, "");
  return trimmed.endsWith(TRPC_ENDPOINT_PATH) ? trimmed : `${trimmed}${TRPC_ENDPOINT_PATH}`;
}

export function createBerthClient(options: BerthClientOptions): BerthClient {
  const endpoint = resolveTrpcEndpoint(options.url);
  const headers = { ...options.headers, authorization: `Bearer ${options.apiKey}` };
  return createTRPCClient<AppRouter>({
    links: [
      splitLink({
        condition: (op) => op.type === "subscription",
        // Node 20 has no global EventSource; the `eventsource` package lets us add the auth header
        // through its fetch hook (browsers' EventSource cannot send headers at all).
        true: httpSubscriptionLink({
          url: endpoint,
          transformer: superjson,
          EventSource,
          eventSourceOptions: {
            fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, ...headers } }),
          },
        }),
        // The server refuses batches over its limit; the link splits larger ones.
        false: httpBatchLink({
          url: endpoint,
          transformer: superjson,
          headers,
          maxItems: TRPC_REQUEST_LIMITS.maxBatchSize,
        }),
      }),
    ],
  });
}
