/**
 * Under `npm start` one process holds two copies of the server modules (the tsx-loaded composition and
 * Next's bundle). These tests load a second, independent copy of a module (a query string makes the module
 * loader evaluate it again, as a bundler's copy is) and check what must hold across copies.
 */
import { TRPCError } from "@trpc/server";
import { afterEach, describe, expect, it } from "vitest";
import { toClientSafeTRPCError } from "@/server/api/error-mapping";
import type * as ErrorsCopy from "@/server/shared/errors";
import type * as RegistryCopy from "@/server/shared/process-registry";
import { AppError, isAppError, toAppError } from "@/server/shared/errors";
import {
  processSlot,
  ProcessRegistrySealedError,
  sealProcessRegistry,
} from "@/server/shared/process-registry";

type ErrorsModule = typeof ErrorsCopy;
type RegistryModule = typeof RegistryCopy;

// Specifiers in variables: the type checker does not resolve them, the module loader loads a second copy.
const ERRORS_COPY = "@/server/shared/errors?second-copy";
const REGISTRY_COPY = "@/server/shared/process-registry?second-copy";
const secondErrorsCopy = () => import(/* @vite-ignore */ ERRORS_COPY) as Promise<ErrorsModule>;
const secondRegistryCopy = () => import(/* @vite-ignore */ REGISTRY_COPY) as Promise<RegistryModule>;

describe("AppError thrown by another copy of errors.ts", () => {
  it("really is another class (the situation under npm start)", async () => {
    const other = await secondErrorsCopy();
    expect(other.AppError).not.toBe(AppError);
  });

  it("is recognised by isAppError, instanceof and toAppError, keeping its code and user message", async () => {
    const other = await secondErrorsCopy();
    const error = new other.AppError("CONFLICT", "an MCP named x exists (internal)", {
      userMessage: "An MCP server named x already exists.",
    });
    expect(isAppError(error)).toBe(true);
    expect(error instanceof AppError).toBe(true);
    expect(toAppError(error)).toBe(error);
    expect(toAppError(error).httpStatus).toBe(409);
  });

  it("maps to its tRPC code and user message, not to a masked 500", async () => {
    const other = await secondErrorsCopy();
    const cause = new other.AppError("NOT_FOUND", "skill y not in partition", { userMessage: "No skill y." });
    const mapped = toClientSafeTRPCError(new TRPCError({ code: "INTERNAL_SERVER_ERROR", cause }));
    expect(mapped.code).toBe("NOT_FOUND");
    expect(mapped.message).toBe("No skill y.");
  });

  it("is not confused with look-alikes: plain errors and objects with a code are not AppErrors", () => {
    expect(isAppError(Object.assign(new Error("x"), { code: "CONFLICT" }))).toBe(false);
    expect(isAppError({ code: "CONFLICT", userMessage: "x" })).toBe(false);
    expect(isAppError(null)).toBe(false);
    expect(new Error("x") instanceof AppError).toBe(false);
  });

  it("keeps ordinary instanceof for subclasses", () => {
    class Narrower extends AppError {}
    expect(new AppError("BAD_REQUEST", "x") instanceof Narrower).toBe(false);
    expect(new Narrower("BAD_REQUEST", "x") instanceof Narrower).toBe(true);
  });
});

describe("process registry across copies", () => {
  const key = `test-slot-${Math.random()}`;
  afterEach(() => {
    processSlot(key).set(undefined);
    // Unseal for the other tests of this file (the registry is per process).
    (globalThis as Record<symbol, { sealedBy?: string }>)[Symbol.for("berth.process-registry")]!.sealedBy =
      undefined;
  });

  it("hands the instance built by one copy to the other instead of building a second one", async () => {
    const other = await secondRegistryCopy();
    expect(other.processSlot).not.toBe(processSlot);
    const built = processSlot(key).get(() => ({ pool: "first" }));
    expect(other.processSlot(key).get(() => ({ pool: "second" }))).toBe(built);
  });

  it("once sealed, refuses to build what the composition root did not", async () => {
    const other = await secondRegistryCopy();
    sealProcessRegistry("this test");
    expect(() => other.processSlot(key).get(() => ({ pool: "late" }))).toThrow(/was not built by this test/);
    expect(() => processSlot(key).get(() => ({}))).toThrow(ProcessRegistrySealedError);
  });
});
