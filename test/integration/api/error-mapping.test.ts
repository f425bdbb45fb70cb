import { TRPCError } from "@trpc/server";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { REQUEST_ID_HEADER } from "@/server/api/context";
import { MASKED_ERROR_MESSAGE } from "@/server/api/error-mapping";
import { createCallerFactory, createTRPCRouter, publicProcedure } from "@/server/api/trpc";
import { AppError } from "@/server/shared/errors";
import { contextFromHeaders, createTestApiRuntime } from "./support/api-test-runtime";

// A router made only for this test, built from the same procedure builders as the real routers, so
// it exercises the one error path every procedure goes through.
const probeRouter = createTRPCRouter({
  conflict: publicProcedure
    .input(z.object({}))
    .output(z.never())
    .query(() => {
      throw new AppError("CONFLICT", "session s1 already has a running turn (internal detail)", {
        userMessage: "A turn is already running for this session.",
        details: { sessionId: "s1" },
      });
    }),
  internalAppError: publicProcedure
    .input(z.object({}))
    .output(z.never())
    .query(() => {
      throw new AppError("INTERNAL", "database password is hunter2", { userMessage: "leaky user message" });
    }),
  unavailable: publicProcedure
    .input(z.object({}))
    .output(z.never())
    .query(() => {
      throw new AppError("UNAVAILABLE", "redis at 10.0.0.3 refused", { userMessage: "Redis 10.0.0.3 down" });
    }),
  plainError: publicProcedure
    .input(z.object({}))
    .output(z.never())
    .query(() => {
      throw new Error("ECONNREFUSED 10.0.0.7:5432");
    }),
  badOutput: publicProcedure
    .input(z.object({}))
    .output(z.object({ count: z.number() }))
    .query(() => ({ count: "secret-string" }) as unknown as { count: number }),
  echo: publicProcedure
    .input(z.object({ name: z.string().min(3), size: z.number().int().positive() }))
    .output(z.object({ name: z.string(), requestId: z.string() }))
    .query(({ input, ctx }) => ({ name: input.name, requestId: ctx.requestId })),
});

const runtime = createTestApiRuntime();
const callerFor = (headers: HeadersInit = {}) =>
  createCallerFactory(probeRouter)(contextFromHeaders(runtime, headers));

async function rejectionOf(promise: Promise<unknown>): Promise<TRPCError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCError);
  return error as TRPCError;
}

describe("the tRPC error mapping", () => {
  it("maps a 4xx AppError to its tRPC code with the user message, not the internal one", async () => {
    const error = await rejectionOf(callerFor().conflict({}));
    expect(error.code).toBe("CONFLICT");
    expect(error.message).toBe("A turn is already running for this session.");
    expect(error.cause).toBeInstanceOf(AppError);
  });

  it.each([
    ["internalAppError", "INTERNAL_SERVER_ERROR"],
    ["unavailable", "SERVICE_UNAVAILABLE"],
    ["plainError", "INTERNAL_SERVER_ERROR"],
    ["badOutput", "INTERNAL_SERVER_ERROR"],
  ] as const)("masks the message of a 5xx (%s → %s)", async (procedure, code) => {
    const error = await rejectionOf(callerFor()[procedure]({}));
    expect(error.code).toBe(code);
    expect(error.message).toBe(MASKED_ERROR_MESSAGE);
    expect(JSON.stringify({ message: error.message })).not.toMatch(/hunter2|10\.0\.0|secret-string/);
  });

  it("rejects invalid input as BAD_REQUEST carrying the zod issues", async () => {
    const error = await rejectionOf(callerFor().echo({ name: "ab", size: -1 }));
    expect(error.code).toBe("BAD_REQUEST");
    const issues = (error.cause as z.ZodError).issues.map((issue) => issue.path.join("."));
    expect(issues.sort()).toEqual(["name", "size"]);
  });
});

describe("request ids", () => {
  it("generates one per request and returns it in the response header", async () => {
    const ctx = contextFromHeaders(runtime);
    const result = await createCallerFactory(probeRouter)(ctx).echo({ name: "abc", size: 1 });
    expect(result.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(ctx.resHeaders?.get(REQUEST_ID_HEADER)).toBe(result.requestId);
  });

  it("keeps a well-formed x-request-id from the caller", async () => {
    const ctx = contextFromHeaders(runtime, { [REQUEST_ID_HEADER]: "trace-42.a:b" });
    const result = await createCallerFactory(probeRouter)(ctx).echo({ name: "abc", size: 1 });
    expect(result.requestId).toBe("trace-42.a:b");
    expect(ctx.resHeaders?.get(REQUEST_ID_HEADER)).toBe("trace-42.a:b");
  });

  it("replaces an unsafe x-request-id instead of echoing it into logs and headers", async () => {
    const ctx = contextFromHeaders(runtime, { [REQUEST_ID_HEADER]: "x".repeat(500) });
    const result = await createCallerFactory(probeRouter)(ctx).echo({ name: "abc", size: 1 });
    expect(result.requestId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
