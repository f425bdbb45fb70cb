/**
 * Under `npm start` one process holds two copies of the server modules (the tsx-loaded composition and
 * Next's bundle). These tests load a second, independent copy of a module (a query string makes the module
 * loader evaluate it again, as a bundler's copy is) and check what must hold across copies.
 */
import { TRPCError } from "@trpc/server";
import { afterEach, describe, expect, it } from "vitest";
import { toClientSafeTRPCError } from "@/server/api/error-mapping";
import type * as ErrorsCopy from "@/server/shared/errors";
import type * as RootCopy from "@/server/shared/process-root";
import { AppError, isAppError, toAppError } from "@/server/shared/errors";
import {
  installProcessRoot,
  peekProcessRoot,
  ProcessRootError,
  processRoot,
  setProcessRootBuilder,
  takeProcessRoot,
} from "@/server/shared/process-root";

type ErrorsModule = typeof ErrorsCopy;
type RootModule = typeof RootCopy;

// Specifiers in variables: the type checker does not resolve them, the module loader loads a second copy.
const ERRORS_COPY = "@/server/shared/errors?second-copy";
const ROOT_COPY = "@/server/shared/process-root?second-copy";
const secondErrorsCopy = () => import(/* @vite-ignore */ ERRORS_COPY) as Promise<ErrorsModule>;
const secondRootCopy = () => import(/* @vite-ignore */ ROOT_COPY) as Promise<RootModule>;

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

describe("the process root across copies", () => {
  afterEach(() => {
    takeProcessRoot();
    setProcessRootBuilder(() => {
      throw new Error("no root in unit tests");
    });
  });

  it("hands the root one copy installed to the other instead of building a second one", async () => {
    const other = await secondRootCopy();
    expect(other.processRoot).not.toBe(processRoot);
    const root = { pool: "first" };
    installProcessRoot(root);
    other.setProcessRootBuilder(() => ({ pool: "second" }));
    expect(other.processRoot()).toBe(root);
    expect(other.peekProcessRoot()).toBe(root);
  });

  it("builds the root once, on first use, when no composition root installed one", async () => {
    const other = await secondRootCopy();
    let builds = 0;
    setProcessRootBuilder(() => ({ pool: `built ${++builds}` }));
    expect(peekProcessRoot()).toBeUndefined();
    const built = other.processRoot();
    expect(processRoot()).toBe(built);
    expect(builds).toBe(1);
  });

  it("refuses a second root while one is installed", async () => {
    const other = await secondRootCopy();
    installProcessRoot({ pool: "first" });
    expect(() => other.installProcessRoot({ pool: "second" })).toThrow(/already runs on another Berth root/);
    expect(() => installProcessRoot({ pool: "third" })).toThrow(ProcessRootError);
  });
});
