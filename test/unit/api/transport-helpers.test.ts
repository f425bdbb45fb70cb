import { TRPCError } from "@trpc/server";
import { describe, expect, it } from "vitest";
import { loopbackAliases } from "@/server/composition/berth";
import { REQUEST_ID_HEADER, resolveRequestId } from "@/server/api/context";
import { MASKED_ERROR_MESSAGE, toClientSafeTRPCError } from "@/server/api/error-mapping";
import { resolveTrpcEndpoint } from "@/server/client/create-berth-client";
import { APP_ERROR_CODES, type AppErrorCode, AppError } from "@/server/shared/errors";

const wrap = (cause: unknown) => new TRPCError({ code: "INTERNAL_SERVER_ERROR", cause });

describe("toClientSafeTRPCError", () => {
  it.each(Object.keys(APP_ERROR_CODES) as AppErrorCode[])(
    "maps AppError %s to a status of the same class",
    (code) => {
      const mapped = toClientSafeTRPCError(
        wrap(new AppError(code, "internal detail", { userMessage: "for users" })),
      );
      const status = APP_ERROR_CODES[code].http;
      expect(mapped.message).toBe(status >= 500 ? MASKED_ERROR_MESSAGE : "for users");
      expect(mapped.cause).toBeInstanceOf(AppError);
    },
  );

  it("keeps 4xx tRPC errors as they are and masks 5xx ones", () => {
    const notFound = new TRPCError({ code: "NOT_FOUND", message: "No procedure x" });
    expect(toClientSafeTRPCError(notFound)).toBe(notFound);
    expect(toClientSafeTRPCError(wrap(new Error("db password wrong"))).message).toBe(MASKED_ERROR_MESSAGE);
  });
});

describe("resolveRequestId", () => {
  it("keeps plain ids and replaces missing, long or header-unsafe ones", () => {
    expect(resolveRequestId(new Headers({ [REQUEST_ID_HEADER]: "abc-123" }))).toBe("abc-123");
    for (const bad of ["", "a".repeat(129), "has space", "semi;colon", "<script>"]) {
      const headers = new Headers();
      if (bad) headers.set(REQUEST_ID_HEADER, bad);
      expect(resolveRequestId(headers)).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});

describe("resolveTrpcEndpoint", () => {
  it("accepts the base URL or the endpoint itself", () => {
    expect(resolveTrpcEndpoint("http://h:3000")).toBe("http://h:3000/api/trpc");
    expect(resolveTrpcEndpoint("http://h:3000/")).toBe("http://h:3000/api/trpc");
    expect(resolveTrpcEndpoint("http://h:3000/api/trpc/")).toBe("http://h:3000/api/trpc");
  });
});

describe("loopbackAliases", () => {
  it("trusts the other loopback spelling of a local base URL only", () => {
    expect(loopbackAliases("http://localhost:3000")).toEqual(["http://127.0.0.1:3000"]);
    expect(loopbackAliases("http://127.0.0.1:4100")).toEqual(["http://localhost:4100"]);
    expect(loopbackAliases("https://berth.example.com")).toEqual([]);
  });
});
