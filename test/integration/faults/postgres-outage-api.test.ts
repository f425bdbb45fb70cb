/**
 * PostgreSQL goes away under a running API process (a real process whose database connection goes through a
 * loopback TCP proxy that drops and refuses connections; the machine's PostgreSQL is never stopped): every
 * call answers a typed, retryable 503 SERVICE_UNAVAILABLE, masked, that the typed client reports as
 * retryable, never a 500; route handlers map it the same way; calls succeed again once the database is back.
 */
import { PrismaPg } from "@prisma/adapter-pg";
import { TRPCClientError } from "@trpc/client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { PrismaClient } from "@/generated/prisma/client";
import { toRouteError } from "@/server/api/error-mapping";
import { type AppRouter } from "@/server/api/root";
import { createBerthClient, isRetryableError } from "@/server/client";
import {
  databaseServerOf,
  databaseUrlThrough,
  startTcpProxy,
  type TcpProxy,
} from "../../fixtures/faults/tcp-proxy";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { startChild, stopChildren, type Child } from "../multiprocess/processes";

async function rejection(call: Promise<unknown>): Promise<TRPCClientError<AppRouter>> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCClientError);
  return error as TRPCClientError<AppRouter>;
}

describe("a PostgreSQL outage under a running API process", { timeout: 90_000 }, () => {
  let proxy: TcpProxy;
  let fixture: TenantFixture;
  let api: Child;
  let url: string;

  beforeAll(async () => {
    proxy = await startTcpProxy(databaseServerOf(process.env.DATABASE_URL!));
    fixture = await createTenantFixture(createTestApiRuntime(), "pgout");
    api = startChild("../faults/http-api-process.ts", {
      DATABASE_URL: databaseUrlThrough(proxy, process.env.DATABASE_URL!),
      LOG_LEVEL: "silent",
    });
    url = (JSON.parse(await api.nextLine((line) => line.startsWith("{"))) as { url: string }).url;
  });
  afterAll(async () => {
    await stopChildren([api], false);
    await proxy.close();
  });

  it("answers a retryable 503 UNAVAILABLE while the database is unreachable, and works again after", async () => {
    const client = createBerthClient({ url, apiKey: fixture.adminKey.plainKey });
    expect((await client.tenant.overview.query({})).tenant.id).toBe(fixture.tenant.id);

    proxy.outage();
    // The connections in the pool are cut, and new ones are refused: both must read as "unavailable".
    for (let attempt = 0; attempt < 3; attempt++) {
      const error = await rejection(client.tenant.overview.query({}));
      expect(error.data?.code).toBe("SERVICE_UNAVAILABLE");
      expect(error.data?.httpStatus).toBe(503);
      expect(error.data).toMatchObject({ retryable: true });
      expect(isRetryableError(error)).toBe(true);
      expect(error.message).toBe("Internal error");
      expect(JSON.stringify(error.shape)).not.toMatch(
        /Can't reach|closed the connection|Prisma|127\.0\.0\.1/,
      );
    }
    const mutation = await rejection(client.apiKey.create.mutate({ name: "during-outage", role: "viewer" }));
    expect(mutation.data?.code).toBe("SERVICE_UNAVAILABLE");

    proxy.restore();
    await vi.waitFor(
      async () => expect((await client.tenant.overview.query({})).tenant.id).toBe(fixture.tenant.id),
      { timeout: 20_000, interval: 250 },
    );
    // A real 4xx stays what it is (not retryable).
    const notFound = await rejection(client.apiKey.revoke.mutate({ apiKeyId: "no-such-key" }));
    expect(notFound.data?.code).toBe("NOT_FOUND");
    expect(isRetryableError(notFound)).toBe(false);
  });

  it("route handlers map a lost database connection to 503 UNAVAILABLE, masked", async () => {
    const unreachable = new PrismaClient({
      adapter: new PrismaPg({ connectionString: databaseUrlThrough({ port: 1 }, process.env.DATABASE_URL!) }),
    });
    proxy.outage();
    const dropped = new PrismaClient({
      adapter: new PrismaPg({ connectionString: databaseUrlThrough(proxy, process.env.DATABASE_URL!) }),
    });
    try {
      for (const failing of [
        unreachable.tenant.findFirst(),
        unreachable.$queryRaw`SELECT 1`,
        dropped.tenant.findFirst(),
        dropped.$queryRaw`SELECT 1`,
      ]) {
        const error: unknown = await failing.then(
          () => null,
          (e: unknown) => e,
        );
        expect(toRouteError(error)).toEqual({
          status: 503,
          body: { error: { code: "UNAVAILABLE", message: "Internal error" } },
        });
      }
    } finally {
      proxy.restore();
      await Promise.all([unreachable.$disconnect(), dropped.$disconnect()]);
    }
  });
});
