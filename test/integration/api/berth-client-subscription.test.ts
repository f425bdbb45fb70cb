/**
 * The client's SSE path (httpSubscriptionLink + the `eventsource` package on Node 20): the API key
 * must reach the server through EventSource's fetch hook, and superjson must carry Dates. The app
 * router has no subscription yet (chat.send arrives with the agent service), so this serves a probe
 * router built from the same procedure builders and context.
 */
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type ApiRuntime, createContextInner } from "@/server/api/context";
import { authedProcedure, createTRPCRouter } from "@/server/api/trpc";
import { AppError } from "@/server/shared/errors";
import { createBerthClient } from "@/server/client/create-berth-client";
import { disconnectDb } from "@/server/db";
import { createTestApiRuntime } from "./support/api-test-runtime";
import { serveFetchHandler, type ServedHandler } from "./support/serve-fetch-handler";
import { createTenantFixture, type TenantFixture } from "./support/tenant-fixtures";

const probeRouter = createTRPCRouter({
  probe: createTRPCRouter({
    ticks: authedProcedure
      .input(z.object({ count: z.number().int().min(1).max(5) }))
      // eslint-disable-next-line @typescript-eslint/require-await -- tRPC subscriptions are async generators
      .subscription(async function* ({ ctx, input }) {
        for (let i = 0; i < input.count; i++) {
          yield { i, at: new Date(), principalKind: ctx.principal.kind };
        }
      }),
    failsAfterFirst: authedProcedure
      .input(z.object({ failure: z.enum(["app-error", "plain-error"]) }))
      // eslint-disable-next-line @typescript-eslint/require-await -- tRPC subscriptions are async generators
      .subscription(async function* ({ input }) {
        yield { i: 0, at: new Date(), principalKind: "n/a" };
        if (input.failure === "app-error") {
          throw new AppError("CONFLICT", "turn t1 holds the session lock", {
            userMessage: "A turn is already running.",
          });
        }
        throw new Error("connect ECONNREFUSED 10.0.0.9:6379");
      }),
  }),
});

type Tick = { i: number; at: Date; principalKind: string };
type ClientErrorLike = { message: string; data?: { code?: string } };
type Handlers<T> = {
  onData: (value: T) => void;
  onError: (error: unknown) => void;
  onComplete: () => void;
  onConnectionStateChange?: (state: { state: string; error: unknown }) => void;
};
type ProbeClient = {
  probe: {
    ticks: {
      subscribe: (input: { count: number }, handlers: Handlers<Tick>) => { unsubscribe: () => void };
    };
    failsAfterFirst: {
      subscribe: (
        input: { failure: "app-error" | "plain-error" },
        handlers: Handlers<Tick>,
      ) => {
        unsubscribe: () => void;
      };
    };
  };
};

let runtime: ApiRuntime;
let server: ServedHandler;
let tenant: TenantFixture;

beforeAll(async () => {
  runtime = createTestApiRuntime();
  server = await serveFetchHandler((req) =>
    fetchRequestHandler({
      endpoint: "/api/trpc",
      req,
      router: probeRouter,
      createContext: ({ resHeaders }) => createContextInner({ runtime, headers: req.headers, resHeaders }),
    }),
  );
  tenant = await createTenantFixture(runtime, "sse");
});

afterAll(async () => {
  await server.close();
  await disconnectDb();
});

function collectTicks(client: ProbeClient, count: number): Promise<Tick[]> {
  return new Promise((resolve, reject) => {
    const ticks: Tick[] = [];
    const subscription = client.probe.ticks.subscribe(
      { count },
      {
        onData: (tick) => ticks.push(tick),
        onError: (error) => {
          reject(error instanceof Error ? error : new Error(String(error)));
          subscription.unsubscribe();
        },
        onComplete: () => resolve(ticks),
      },
    );
  });
}

describe("createBerthClient subscriptions", () => {
  it("streams events authenticated by the API key, with Dates intact", async () => {
    const client = createBerthClient({
      url: server.url,
      apiKey: tenant.adminKey.plainKey,
    }) as unknown as ProbeClient;
    const ticks = await collectTicks(client, 3);
    expect(ticks.map((t) => t.i)).toEqual([0, 1, 2]);
    expect(ticks.every((t) => t.at instanceof Date && t.principalKind === "api_key")).toBe(true);
  });

  it("fails the subscription with UNAUTHORIZED for a bad key", async () => {
    const client = createBerthClient({ url: server.url, apiKey: "berth_wrong" }) as unknown as ProbeClient;
    const error = await collectTicks(client, 1).then(
      () => null,
      (e: unknown) => e as { data?: { code?: string } },
    );
    expect(error?.data?.code).toBe("UNAUTHORIZED");
  });

  it("maps a 4xx AppError thrown mid-stream to its code and user message, ending the stream", async () => {
    const client = createBerthClient({
      url: server.url,
      apiKey: tenant.adminKey.plainKey,
    }) as unknown as ProbeClient;
    const received: Tick[] = [];
    const error = await new Promise<ClientErrorLike>((resolve) => {
      const subscription = client.probe.failsAfterFirst.subscribe(
        { failure: "app-error" },
        {
          onData: (tick) => received.push(tick),
          onError: (e) => {
            resolve(e as ClientErrorLike);
            subscription.unsubscribe();
          },
          onComplete: () => resolve({ message: "completed without an error" }),
        },
      );
    });
    expect(received).toHaveLength(1);
    expect(error.data?.code).toBe("CONFLICT");
    expect(error.message).toBe("A turn is already running.");
  });

  // tRPC's SSE client treats 5xx as transient and re-subscribes (see the report: side-effecting
  // subscriptions such as chat.send must be resumable or end with a 4xx/an error event instead).
  it("masks a 5xx thrown mid-stream; the client reports it and reconnects", async () => {
    const client = createBerthClient({
      url: server.url,
      apiKey: tenant.adminKey.plainKey,
    }) as unknown as ProbeClient;
    let received = 0;
    const error = await new Promise<ClientErrorLike>((resolve) => {
      const subscription = client.probe.failsAfterFirst.subscribe(
        { failure: "plain-error" },
        {
          onData: () => received++,
          onError: (e) => resolve(e as ClientErrorLike),
          onComplete: () => resolve({ message: "completed without an error" }),
          onConnectionStateChange: (state) => {
            if (state.state === "connecting" && state.error) {
              // Resolve first: unsubscribing completes the subscription synchronously.
              resolve(state.error as ClientErrorLike);
              subscription.unsubscribe();
            }
          },
        },
      );
    });
    expect(received).toBeGreaterThanOrEqual(1);
    expect(error.data?.code).toBe("INTERNAL_SERVER_ERROR");
    expect(error.message).toBe("Internal error");
    expect(JSON.stringify(error.data)).not.toContain("10.0.0.9");
  });
});
