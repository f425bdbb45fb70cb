/**
 * PostgreSQL restarts under a running API process that is serving requests: the test's own server (never
 * the machine's) is shut down with requests in flight (57P01 admin_shutdown, then refused connections) and
 * started again, held in its start-up recovery, where it refuses every connection with 57P03
 * cannot_connect_now (Prisma 7 reports that as P2039 with the SQLSTATE only under
 * `meta.driverAdapterError.cause`). Every answer in the whole window is a 200 or a retryable 503, never a
 * masked 500, and calls succeed again once recovery ends.
 */
import { PrismaPg } from "@prisma/adapter-pg";
import { TRPCClientError } from "@trpc/client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { PrismaClient } from "@/generated/prisma/client";
import { toRouteError } from "@/server/api/error-mapping";
import { createBerthClient, isRetryableError } from "@/server/client";
import { ensureDatabase, migrateDeploy } from "@/scripts/services/database";
import { startOwnPostgres, type OwnPostgres } from "../../fixtures/faults/postgres-server";
import { startChild, stopChildren, type Child } from "../multiprocess/processes";

type Phase = "up" | "shutting down" | "down" | "recovering" | "recovered";
type Outcome = { phase: Phase; status: number; code?: string | undefined; retryable?: boolean };

describe("a PostgreSQL restart under a running API process", { timeout: 120_000 }, () => {
  let postgres: OwnPostgres;
  let api: Child;
  let databaseUrl: string;
  let client: ReturnType<typeof createBerthClient>;
  let tenantId: string;

  beforeAll(async () => {
    postgres = await startOwnPostgres();
    databaseUrl = postgres.url("berth");
    await ensureDatabase(databaseUrl);
    await migrateDeploy(databaseUrl);
    api = startChild("../faults/http-api-process.ts", {
      DATABASE_URL: databaseUrl,
      BERTH_FAULTS_TENANT_LABEL: "pgrestart",
      LOG_LEVEL: "silent",
    });
    const started = JSON.parse(await api.nextLine((line) => line.startsWith("{"))) as {
      url: string;
      tenantId: string;
      adminKey: string;
    };
    tenantId = started.tenantId;
    client = createBerthClient({ url: started.url, apiKey: started.adminKey });
  });
  afterAll(async () => {
    if (api) await stopChildren([api], false);
    await postgres?.close();
  });

  it("answers only 200s and retryable 503s while PostgreSQL restarts and recovers, then works again", async () => {
    expect((await client.tenant.overview.query({})).tenant.id).toBe(tenantId);

    let phase: Phase = "up";
    let running = true;
    const outcomes: Outcome[] = [];
    const callOnce = async (): Promise<void> => {
      const calledIn = phase;
      try {
        const overview = await client.tenant.overview.query({});
        expect(overview.tenant.id).toBe(tenantId);
        outcomes.push({ phase: calledIn, status: 200 });
      } catch (error) {
        if (!(error instanceof TRPCClientError)) throw error;
        outcomes.push({
          phase: calledIn,
          status: (error.data as { httpStatus?: number } | undefined)?.httpStatus ?? 0,
          code: (error.data as { code?: string } | undefined)?.code,
          retryable: isRetryableError(error),
        });
      }
    };
    // Four callers back to back, so requests are in flight at every moment of the restart.
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (running) await callOnce();
      }),
    );
    const answeredIn = (wanted: Phase) => outcomes.filter((outcome) => outcome.phase === wanted).length;
    const waitForAnswers = (wanted: Phase, count: number) =>
      vi.waitFor(() => expect(answeredIn(wanted)).toBeGreaterThanOrEqual(count), {
        timeout: 20_000,
        interval: 20,
      });

    try {
      await waitForAnswers("up", 8);
      phase = "shutting down";
      await postgres.stop();
      phase = "down";
      await waitForAnswers("down", 4);
      await postgres.startInRecovery();
      phase = "recovering";
      // The server listens but refuses with 57P03: hold it there until requests have met it.
      await waitForAnswers("recovering", 8);
      await postgres.finishRecovery();
      phase = "recovered";
      await vi.waitFor(
        () => expect(outcomes.some((o) => o.phase === "recovered" && o.status === 200)).toBe(true),
        { timeout: 20_000, interval: 50 },
      );
    } finally {
      running = false;
      await load;
    }

    const wrong = outcomes.filter(
      (o) => o.status !== 200 && !(o.status === 503 && o.code === "SERVICE_UNAVAILABLE" && o.retryable),
    );
    expect(wrong).toEqual([]);
    // The recovery window was really met: those requests were all refused, as retryable 503s.
    const duringRecovery = outcomes.filter((o) => o.phase === "recovering");
    expect(duringRecovery.filter((o) => o.status === 503).length).toBeGreaterThanOrEqual(8);
  });

  it("maps the real error of a server in start-up (P2039 carrying 57P03) to a retryable 503", async () => {
    await postgres.stop();
    await postgres.startInRecovery();
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl }) });
    try {
      for (const failing of [prisma.tenant.findFirst(), prisma.$queryRaw`SELECT 1`]) {
        const error: unknown = await failing.then(
          () => null,
          (e: unknown) => e,
        );
        expect(error).toMatchObject({ meta: { driverAdapterError: { cause: { code: "57P03" } } } });
        expect(toRouteError(error)).toEqual({
          status: 503,
          body: { error: { code: "UNAVAILABLE", message: "Internal error" } },
        });
      }
    } finally {
      await prisma.$disconnect();
      await postgres.finishRecovery();
    }
  });
});
