import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getDb } from "@/server/db";
import { evaluateBudgets } from "@/server/modules/metering/budget.service";
import { changeBudget } from "@/server/modules/quota/quota-admin.service";
import { createWebhookService } from "@/server/modules/webhook/webhook.service";
import { verifyWebhookSignature } from "@/server/modules/webhook/webhook-signing";
import { testLog } from "../queue/queue-fixtures";
import { startReceiver, startWebhookWorkers } from "./support";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { installProcessQueues } from "../operator/support";
import { processBerth } from "@/server/composition/process-berth";

/**
 * A budget alert reaches the tenant's lifecycle webhooks (issue 15): each alert percentage crossed this month
 * is one signed delivery, `budget.threshold_reached` below 100 % and `budget.exhausted` at 100 %, retried
 * like every delivery, and never sent twice when the budgets are evaluated again.
 */
describe("budget alerts as lifecycle webhooks (real Postgres, Redis, workers, a loopback receiver)", () => {
  const secretKey = secretKeyFromBytes(randomBytes(32));
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let workers: Awaited<ReturnType<typeof startWebhookWorkers>>;
  let tenant: TestTenant;
  let uninstall: () => Promise<void>;
  let policy: { allowedOrigins: string[] };

  beforeAll(async () => {
    receiver = await startReceiver();
    policy = { allowedOrigins: [receiver.origin] };
    workers = await startWebhookWorkers({ secretKey, policy, connectionName: "test-budget-webhooks" });
    // The budget evaluation emits through the process' queues, as in the worker that runs it.
    uninstall = await installProcessQueues(workers.queues);
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await uninstall();
    await workers.close();
    await receiver.close();
  });

  it("sends budget.threshold_reached at 50 % and budget.exhausted at 100 %, signed, retried, once each", async () => {
    const service = createWebhookService({
      audit: processBerth().audit,
      db: processBerth().db,
      secretKey,
      policy,
      queues: () => processBerth().queues,
    });
    const { endpoint, secret } = await service.create(tenant.scope, {
      url: `${receiver.origin}/budget`,
      events: ["budget.threshold_reached", "budget.exhausted"],
    });
    await changeBudget(
      tenant.scope,
      { monthlyBudgetUnits: 4, alertPercents: [50, 100], hardStop: true, stopWorkspaces: false },
      processBerth().quota,
      processBerth().audit,
      processBerth().db,
    );
    const rates = {
      "*": {
        workspaceHour: 0,
        provision: 0,
        turn: 1,
        inputTokensPerMillion: 0,
        outputTokensPerMillion: 0,
        toolCall: 0,
      },
    };
    const deps = {
      rates,
      requestStop: () => Promise.resolve(),
      log: testLog,
      audit: processBerth().audit,
      lifecycle: processBerth().lifecycle,
    };
    const turns = (count: number) =>
      getDb().usageRecord.createMany({
        data: Array.from({ length: count }, () => ({
          id: randomUUID(),
          tenantId: tenant.tenantId,
          kind: "turn" as const,
          quantity: 1,
          at: new Date(),
        })),
      });
    const delivered = (event: string) =>
      receiver.received.filter((r) => r.headers["berth-event"] === event && r.headers["berth-delivery"]);

    // Two turns of a 4-unit budget: 50 %. The endpoint fails once first: the delivery is retried.
    receiver.script.push(503);
    await turns(2);
    await evaluateBudgets([tenant.tenantId], deps, undefined, processBerth().db);
    await vi.waitFor(() => expect(receiver.received).toHaveLength(2), { timeout: 30_000, interval: 100 });
    const [failed, retried] = receiver.received;
    expect(failed!.headers["berth-delivery"]).toBe(retried!.headers["berth-delivery"]);
    expect(JSON.parse(retried!.body)).toMatchObject({
      event: "budget.threshold_reached",
      tenantId: tenant.tenantId,
      data: { percent: 50, spentUnits: 2, budgetUnits: 4, hardStop: true },
    });

    // Two more: 100 %, the budget is spent.
    await turns(2);
    await evaluateBudgets([tenant.tenantId], deps, undefined, processBerth().db);
    await vi.waitFor(() => expect(delivered("budget.exhausted")).toHaveLength(1), { timeout: 30_000 });
    expect(JSON.parse(delivered("budget.exhausted")[0]!.body)).toMatchObject({
      event: "budget.exhausted",
      data: { percent: 100, spentUnits: 4, budgetUnits: 4 },
    });
    for (const request of receiver.received) {
      expect(verifyWebhookSignature(secret, request.body, String(request.headers["berth-signature"]))).toBe(
        true,
      );
    }

    // Evaluated again (the next flush): both alerts were raised this month, nothing is emitted twice.
    expect(await evaluateBudgets([tenant.tenantId], deps, undefined, processBerth().db)).toEqual([
      { tenantId: tenant.tenantId, alerts: [], stopped: [] },
    ]);
    await vi.waitFor(async () => {
      const deliveries = await service.deliveries(tenant.scope, { endpointId: endpoint.id });
      expect(deliveries.map((d) => [d.event, d.status]).sort()).toEqual([
        ["budget.exhausted", "succeeded"],
        ["budget.threshold_reached", "succeeded"],
      ]);
    });
  });
});
