/**
 * The typed Node client for Berth's API: `createBerthClient({ url, apiKey })` returns a tRPC proxy
 * whose procedures and types are exactly the server's `AppRouter`. Queries and mutations go over one
 * batched HTTP link; `chat.send` goes over a streaming link of its own (POST, JSON lines).
 *
 * chat.send contract (also what the dashboard's chat UI uses, through app/_trpc/client.tsx):
 * ```ts
 * const controller = new AbortController();
 * const events = await client.chat.send.mutate({ sessionId, message }, { signal: controller.signal });
 * for await (const event of events) { ... } // text-delta, tool-call, tool-result, offload, error, done
 * ```
 * - `mutate` resolves once the turn has started (NOT_FOUND, FORBIDDEN, CONFLICT while another turn of the
 *   session runs, BAD_REQUEST reject it before any event); the iterable then yields the turn's events in
 *   order and ends after `done`, which is sent only once the turn's messages are stored (so `chat.history`
 *   right after it includes them). A failure during the turn is an `error` event followed by `done`.
 * - One turn per request: aborting `signal` (or the connection dropping) cancels the turn; `chat.cancel`
 *   cancels it from any client or process (the stream then ends with `done` status `cancelled`).
 * - `idempotencyKey` (one per message): sending it again after a broken or silent stream reports the original
 *   turn instead of running it twice (`chat.run` does this itself); `keepalive` events come every 15 s.
 * - It must never be batched with other calls or sent over the non-streaming link (the server answers 400
 *   before starting a turn): `berthLinks` below routes it.
 */
import {
  createTRPCClient,
  httpBatchLink,
  httpBatchStreamLink,
  httpSubscriptionLink,
  splitLink,
  type HTTPHeaders,
  type TRPCClient,
  type TRPCLink,
} from "@trpc/client";
import superjson from "superjson";
import { TRPC_REQUEST_LIMITS } from "@/server/api/request-limits";
import type { AppRouter } from "@/server/api/root";
import { type ChatRunInput, type ChatRunOptions, type ChatRunResult, runChatTurn } from "./chat-run";

const TRPC_ENDPOINT_PATH = "/api/trpc";

/** The procedures whose results stream (a mutation returning an async iterable). */
const STREAMED_PROCEDURES: ReadonlySet<string> = new Set(["chat.send", "chat.attach"]);

export type BerthClientOptions = {
  /** Berth's base URL (`http://localhost:3000`) or the tRPC endpoint itself (`…/api/trpc`). */
  url: string;
  /** A tenant API key, sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** Extra headers for every call, e.g. `x-request-id` for tracing. */
  headers?: Record<string, string>;
};

type TrpcBerthClient = TRPCClient<AppRouter>;

/**
 * The typed client: every procedure of the API, plus `chat.run`, which runs a turn to its end and resolves
 * with its final text and usage (see chat-run.ts).
 */
export type BerthClient = Omit<TrpcBerthClient, "chat"> & {
  chat: TrpcBerthClient["chat"] & {
    run(input: ChatRunInput, options?: ChatRunOptions): Promise<ChatRunResult>;
  };
};

export function resolveTrpcEndpoint(url: string): string {
  const trimmed = url.replace(/\/+$/, "");
  return trimmed.endsWith(TRPC_ENDPOINT_PATH) ? trimmed : `${trimmed}${TRPC_ENDPOINT_PATH}`;
}

/**
 * The links of every Berth client (Node and the dashboard): streamed procedures over httpBatchStreamLink,
 * one call per request (a turn is never batched with other calls), everything else over httpBatchLink.
 */
export function berthLinks(options: { url: string; headers?: HTTPHeaders }): TRPCLink<AppRouter>[] {
  const common = { url: options.url, transformer: superjson, headers: options.headers ?? {} };
  return [
    // Subscriptions (`live.changes`) are server-sent events; they need a global EventSource (browsers; in
    // Node 20 install one, e.g. the `eventsource` package, as globalThis.EventSource).
    splitLink({
      condition: (op) => op.type === "subscription",
      true: httpSubscriptionLink({ url: options.url, transformer: superjson }),
      false: splitLink({
        condition: (op) => STREAMED_PROCEDURES.has(op.path),
        true: httpBatchStreamLink({ ...common, maxItems: 1 }),
        // The server refuses batches over its limit; the link splits larger ones.
        false: httpBatchLink({ ...common, maxItems: TRPC_REQUEST_LIMITS.maxBatchSize }),
      }),
    }),
  ];
}

export function createBerthClient(options: BerthClientOptions): BerthClient {
  const headers = { ...options.headers, authorization: `Bearer ${options.apiKey}` };
  const client = createTRPCClient<AppRouter>({
    links: berthLinks({ url: resolveTrpcEndpoint(options.url), headers }),
  });
  const run = (input: ChatRunInput, runOptions?: ChatRunOptions) =>
    runChatTurn(
      (sendInput, sendOptions) => client.chat.send.mutate(sendInput, sendOptions),
      input,
      runOptions,
      (cancelInput) => client.chat.cancel.mutate(cancelInput),
    );
  // tRPC's client is a proxy that turns every property into a procedure path: `chat.run` is added in front
  // of it (a helper, not a procedure), everything else falls through.
  const chat = new Proxy(client.chat, {
    get: (target, property, receiver): unknown =>
      property === "run" ? run : Reflect.get(target, property, receiver),
  });
  return new Proxy(client, {
    get: (target, property, receiver): unknown =>
      property === "chat" ? chat : Reflect.get(target, property, receiver),
  }) as unknown as BerthClient;
}
