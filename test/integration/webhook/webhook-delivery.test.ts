import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { createWebhookService } from "@/server/modules/webhook/webhook.service";
import { deliverWebhook, dispatchWebhookEvent } from "@/server/modules/webhook/webhook-delivery.service";
import { verifyWebhookSignature } from "@/server/modules/webhook/webhook-signing";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { startReceiver, startWebhookWorkers } from "./support";
import { addTestMember, createTestTenant, type TestTenant } from "../db/fixtures";
import { jobOutcome } from "../queue/queue-fixtures";
import { processBerth } from "@/server/composition/process-berth";

describe("lifecycle webhooks: signed deliveries, retries with backoff, the URL policy (real Postgres, Redis, workers)", () => {
  const secretKey = secretKeyFromBytes(randomBytes(32));
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let workers: Awaited<ReturnType<typeof startWebhookWorkers>>;
  let queues: QueueSet<BerthJobCatalog>;
  let tenant: TestTenant;
  // The operator allow-lists exactly this receiver's origin (http, loopback): nothing else is exempt.
  let policy: { allowedOrigins: string[] };

  beforeAll(async () => {
    receiver = await startReceiver();
    policy = { allowedOrigins: [receiver.origin] };
    workers = await startWebhookWorkers({ secretKey, policy, connectionName: "test-webhooks" });
    queues = workers.queues;
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await workers.close();
    await receiver.close();
  });

  const service = () =>
    createWebhookService({
      db: processBerth().db,
      secretKey,
      policy,
      queues: () => processBerth().queues,
      audit: processBerth().audit,
    });
  const dispatch = (event: "workspace.ready" | "turn.failed", data: Record<string, string>) =>
    createEnqueue(queues)("webhook.dispatch", {
      tenantId: tenant.tenantId,
      event,
      occurredAt: new Date().toISOString(),
      data,
    });

  it("signs each delivery (HMAC-SHA256 over timestamp + body) and retries a failing endpoint with backoff until it answers 2xx", async () => {
    const { endpoint, secret } = await service().create(tenant.scope, {
      url: `${receiver.origin}/hooks`,
      events: ["workspace.ready"],
    });
    expect(secret).toMatch(/^whsec_/);
    // The secret is shown once: no read returns it.
    expect(JSON.stringify(await service().list(tenant.scope))).not.toContain(secret);

    receiver.script.push(500, 503);
    await dispatch("workspace.ready", { workspaceId: "ws-1" });
    await vi.waitFor(
      async () => {
        const [delivery] = await service().deliveries(tenant.scope, { endpointId: endpoint.id });
        expect(delivery?.status).toBe("succeeded");
      },
      { timeout: 30_000, interval: 200 },
    );
    const [delivery] = await service().deliveries(tenant.scope, { endpointId: endpoint.id });
    expect(delivery!.attempts.map((a) => [a.attempt, a.statusCode, a.response])).toEqual([
      [1, 500, "answer 500"],
      [2, 503, "answer 503"],
      [3, 200, "answer 200"],
    ]);
    expect(receiver.received).toHaveLength(3);
    for (const request of receiver.received) {
      const signature = String(request.headers["berth-signature"]);
      expect(verifyWebhookSignature(secret, request.body, signature)).toBe(true);
      expect(verifyWebhookSignature("whsec_wrong", request.body, signature)).toBe(false);
      expect(verifyWebhookSignature(secret, `${request.body} `, signature)).toBe(false);
      expect(request.headers["berth-event"]).toBe("workspace.ready");
      expect(request.headers["berth-delivery"]).toBe(delivery!.id);
      expect(JSON.parse(request.body)).toMatchObject({
        id: delivery!.id,
        event: "workspace.ready",
        tenantId: tenant.tenantId,
        data: { workspaceId: "ws-1" },
      });
    }
    // Backoff: exponential from 1 s, so the retries came at least ~1 s and ~2 s after the attempt before.
    const [first, second, third] = receiver.received.map((r) => r.at);
    expect(second! - first!).toBeGreaterThanOrEqual(900);
    expect(third! - second!).toBeGreaterThanOrEqual(1_800);
  });

  it("keeps only the first 2 KiB of a response, and a retried dispatch makes no second delivery", async () => {
    const { endpoint } = await service().create(tenant.scope, {
      url: `${receiver.origin}/big`,
      events: ["turn.failed"],
    });
    const requested: string[] = [];
    const payload = {
      tenantId: tenant.tenantId,
      event: "turn.failed" as const,
      occurredAt: new Date().toISOString(),
      data: { sessionId: "s-big" },
      endpointId: endpoint.id,
    };
    const deps = {
      db: processBerth().db,
      requestDelivery: (id: string) => Promise.resolve(void requested.push(id)),
    };
    await dispatchWebhookEvent(deps, payload, "dispatch-job-1");
    await dispatchWebhookEvent(deps, payload, "dispatch-job-1"); // the same job, retried
    expect(new Set(requested).size).toBe(1);
    expect(await service().deliveries(tenant.scope, { endpointId: endpoint.id })).toHaveLength(1);
    await expect(
      deliverWebhook(
        { db: processBerth().db, secretKey, policy },
        { deliveryId: requested[0]! },
        { number: 1, isLast: false },
      ),
    ).resolves.toMatchObject({ status: "succeeded", statusCode: 200 });
    const [delivery] = await service().deliveries(tenant.scope, { endpointId: endpoint.id });
    expect(delivery!.attempts[0]!.response).toBe("x".repeat(2_048));
    await service().remove(tenant.scope, endpoint.id);
  });

  it("delivers only to endpoints subscribed to the event", async () => {
    const before = receiver.received.length;
    await dispatch("turn.failed", { sessionId: "s-1" });
    // The dispatch job finds no subscribed endpoint: no delivery row, no request.
    const job = await dispatch("turn.failed", { sessionId: "s-2" });
    await expect(jobOutcome(queues.get("webhook"), job, 15_000)).resolves.toEqual({
      deliveries: 0,
    });
    expect(receiver.received.length).toBe(before);
  });

  it("refuses plain http and private addresses unless the operator listed the exact origin", async () => {
    const other = await startReceiver(); // same host, another port: not on the list
    try {
      await expect(
        service().create(tenant.scope, { url: `${other.origin}/hooks`, events: ["turn.failed"] }),
      ).rejects.toMatchObject({ code: "BAD_REQUEST" });
      await expect(
        service().create(tenant.scope, {
          url: `https://127.0.0.1:${new URL(other.origin).port}/hooks`,
          events: ["turn.failed"],
        }),
      ).rejects.toMatchObject({ code: "FORBIDDEN", details: { reason: "webhook_host_not_allowed" } });
      await expect(
        service().create(tenant.scope, { url: "https://169.254.169.254/latest", events: ["turn.failed"] }),
      ).rejects.toMatchObject({ code: "FORBIDDEN" });
    } finally {
      await other.close();
    }
  });

  it("names the webhook URL, not an MCP URL, when its host does not resolve", async () => {
    const refusal = service().create(tenant.scope, {
      url: "https://no-such-host.invalid/hooks",
      events: ["turn.failed"],
    });
    await expect(refusal).rejects.toMatchObject({
      code: "BAD_REQUEST",
      userMessage: "The webhook URL's host no-such-host.invalid does not resolve.",
    });
  });

  it("refuses IPv6 forms that embed a non-public IPv4 (6to4, IPv4-compatible, -mapped, -translated, Teredo, NAT64)", async () => {
    const refusedHosts = [
      "[2002:7f00:1::]", // 6to4 of 127.0.0.1
      "[2002:a9fe:a9fe::1]", // 6to4 of 169.254.169.254
      "[::127.0.0.1]", // IPv4-compatible
      "[::a00:1]", // IPv4-compatible 10.0.0.1, in hex
      "[::ffff:0:192.168.0.1]", // IPv4-translated
      "[::ffff:127.0.0.1]", // IPv4-mapped
      "[2001:0:a00:1::]", // Teredo, server 10.0.0.1
      "[2001:0:5db8:d822:8000:63bf:80ff:fffe]", // Teredo, public server, client 127.0.0.1 (inverted bits)
      "[64:ff9b::7f00:1]", // NAT64
      "[64:ff9b:1::a00:1]", // local-use NAT64
    ];
    for (const host of refusedHosts) {
      await expect(
        service().create(tenant.scope, { url: `https://${host}/hooks`, events: ["turn.failed"] }),
        host,
      ).rejects.toMatchObject({ code: "FORBIDDEN", details: { reason: "webhook_host_not_allowed" } });
    }
  });

  it("fails a delivery at once, without retries, when the address is no longer allowed at send time", async () => {
    const { endpoint } = await service().create(tenant.scope, {
      url: `${receiver.origin}/later-refused`,
      events: ["turn.failed"],
    });
    const before = receiver.received.length;
    policy.allowedOrigins = []; // the operator removed the origin after the endpoint was registered
    try {
      await dispatch("turn.failed", { sessionId: "s-3" });
      await vi.waitFor(
        async () => {
          const [delivery] = await service().deliveries(tenant.scope, { endpointId: endpoint.id });
          expect(delivery?.status).toBe("failed");
          expect(delivery?.attempts).toHaveLength(1);
          expect(delivery?.attempts[0]).toMatchObject({ statusCode: null });
        },
        { timeout: 15_000, interval: 200 },
      );
    } finally {
      policy.allowedOrigins = [receiver.origin];
    }
    expect(receiver.received.length).toBe(before);
  });

  it("lets only admins manage endpoints, and never another tenant's", async () => {
    const member = await addTestMember(tenant, "member");
    await expect(service().list(member.scope)).rejects.toMatchObject({ code: "FORBIDDEN" });
    const [mine] = await service().list(tenant.scope);
    const other = await createTestTenant();
    await expect(service().remove(other.scope, mine!.id)).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(service().deliveries(other.scope, { endpointId: mine!.id })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    expect(await service().deliveries(other.scope, {})).toEqual([]);
    await expect(service().remove(tenant.scope, mine!.id)).resolves.toEqual({ deleted: true });
  });
});
