/**
 * The client's streaming path for chat.send (a mutation whose result is an async iterable, over
 * httpBatchStreamLink: POST, JSON lines): the API key reaches the server, superjson carries Dates, errors
 * thrown before and during the stream map like any other call, and aborting the client's signal reaches
 * the procedure's signal (what cancels a turn). A probe router mounted at `chat.send` isolates the
 * transport from the agent loop; the real chat.send runs over HTTP in test/integration/start/web-security.
 */
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { type ApiRuntime, createContextInner } from "@/server/api/context";
import { authedProcedure, createTRPCRouter } from "@/server/api/trpc";
import { AppError } from "@/server/shared/errors";
import { createBerthClient } from "@/server/client/create-berth-client";
import { createTestApiRuntime } from "./support/api-test-runtime";
import { serveFetchHandler, type ServedHandler } from "./support/serve-fetch-handler";
import { createTenantFixture, type TenantFixture } from "./support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";

type Tick = { i: number; at: Date; principalKind: string };

const serverSide = { aborted: 0, finished: 0 };

const probeRouter = createTRPCRouter({
  chat: createTRPCRouter({
    send: authedProcedure
      .input(
        z.object({
          count: z.number().int().min(1).max(1000),
          failure: z.enum(["none", "before", "app-error", "plain-error"]).default("none"),
          // After the first tick, wait for the client to abort (the test's abort case).
          waitForAbort: z.boolean().default(false),
        }),
      )
      // Like ChatService.send: a promise (rejected before any event) of the event stream.
      // eslint-disable-next-line @typescript-eslint/require-await -- the rejection must come from the promise
      .mutation(async ({ ctx, input, signal }) => {
        if (input.failure === "before") {
          throw new AppError("CONFLICT", "turn t1 holds the session lock", {
            userMessage: "A turn is already running.",
          });
        }
        return ticks(ctx.principal.kind, input, signal);
      }),
  }),
});

async function* ticks(
  principalKind: string,
  input: { count: number; failure: string; waitForAbort: boolean },
  signal: AbortSignal | undefined,
): AsyncGenerator<Tick> {
  try {
    for (let i = 0; i < input.count; i++) {
      yield { i, at: new Date(), principalKind };
      if (input.failure === "app-error") {
        throw new AppError("CONFLICT", "lost the lock", { userMessage: "The turn lost its lock." });
      }
      if (input.failure === "plain-error") throw new Error("connect ECONNREFUSED 10.0.0.9:6379");
      if (input.waitForAbort) {
        await new Promise<void>((resolve) => {
          if (signal?.aborted) resolve();
          signal?.addEventListener("abort", () => resolve(), { once: true });
        });
        if (signal?.aborted) serverSide.aborted++;
        return;
      }
    }
  } finally {
    serverSide.finished++;
  }
}

type ProbeClient = {
  chat: {
    send: {
      mutate: (
        input: { count: number; failure?: string; waitForAbort?: boolean },
        opts?: { signal?: AbortSignal },
      ) => Promise<AsyncIterable<Tick>>;
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
  tenant = await createTenantFixture(runtime, "stream");
});

afterAll(async () => {
  await server.close();
  await closeProcessBerth();
});

const client = (apiKey = tenant.adminKey.plainKey) =>
  createBerthClient({ url: server.url, apiKey }) as unknown as ProbeClient;

async function drain<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

async function failure(promise: Promise<unknown>): Promise<{ message: string; data?: { code?: string } }> {
  const outcome = await promise.then(
    () => null,
    (error: unknown) => error as { message: string; data?: { code?: string } },
  );
  if (!outcome) expect.fail("expected a failure");
  return outcome;
}

describe("createBerthClient streamed mutations (chat.send's transport)", () => {
  it("streams events in order over POST, authenticated by the API key, with Dates intact", async () => {
    const ticks = await drain(await client().chat.send.mutate({ count: 200 }));
    expect(ticks.map((t) => t.i)).toEqual([...Array(200).keys()]);
    expect(ticks.every((t) => t.at instanceof Date && t.principalKind === "api_key")).toBe(true);
  });

  it("rejects the call itself with UNAUTHORIZED for a bad key and with the AppError's code before the stream", async () => {
    expect((await failure(client("berth_wrong").chat.send.mutate({ count: 1 }))).data?.code).toBe(
      "UNAUTHORIZED",
    );
    const conflict = await failure(client().chat.send.mutate({ count: 1, failure: "before" }));
    expect(conflict.data?.code).toBe("CONFLICT");
    expect(conflict.message).toBe("A turn is already running.");
  });

  it("maps a 4xx AppError thrown mid-stream to its code and user message, ending the stream", async () => {
    const received: Tick[] = [];
    const error = await failure(
      (async () => {
        for await (const tick of await client().chat.send.mutate({ count: 5, failure: "app-error" })) {
          received.push(tick);
        }
      })(),
    );
    expect(received).toHaveLength(1);
    expect(error.data?.code).toBe("CONFLICT");
    expect(error.message).toBe("The turn lost its lock.");
  });

  it("masks a 5xx thrown mid-stream and does not re-run the call (no reconnect as SSE did)", async () => {
    const finishedBefore = serverSide.finished;
    const error = await failure(
      (async () => {
        for await (const _ of await client().chat.send.mutate({ count: 5, failure: "plain-error" })) {
          // drain
        }
      })(),
    );
    expect(error.data?.code).toBe("INTERNAL_SERVER_ERROR");
    expect(error.message).toBe("Internal error");
    expect(JSON.stringify(error)).not.toContain("10.0.0.9");
    expect(serverSide.finished).toBe(finishedBefore + 1);
  });

  it("aborting the client's signal aborts the procedure's signal on the server", async () => {
    const controller = new AbortController();
    const abortedBefore = serverSide.aborted;
    const events = await client().chat.send.mutate(
      { count: 5, waitForAbort: true },
      { signal: controller.signal },
    );
    const iterator = events[Symbol.asyncIterator]();
    expect((await iterator.next()).value).toMatchObject({ i: 0 });
    controller.abort();
    await expect(iterator.next()).rejects.toThrow();
    await vi.waitFor(() => expect(serverSide.aborted).toBe(abortedBefore + 1), { timeout: 10_000 });
  });
});
