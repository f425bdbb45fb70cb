import type { DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import type { WebhookDeliveryView, WebhookEndpointView } from "./webhook.types";

/** The only Prisma importer of the webhook module. Tenant reads take a TenantScope; job reads take ids. */

const endpointView = {
  id: true,
  url: true,
  description: true,
  events: true,
  enabled: true,
  createdAt: true,
} as const;

export async function createEndpoint(
  scope: TenantScope,
  row: {
    id: string;
    url: string;
    description: string;
    events: string[];
    secretSealed: string;
    /** `scopedCreateKey` of the request's idempotency key (unique per tenant). */
    createKey: string | null;
  },
  db: DbClient,
): Promise<WebhookEndpointView> {
  return db.webhookEndpoint.create({ data: { ...row, tenantId: scope.tenantId }, select: endpointView });
}

/** The endpoint a create with this `createKey` made, with its sealed secret (a replay shows it again). */
export async function findEndpointByCreateKey(scope: TenantScope, createKey: string, db: DbClient) {
  return db.webhookEndpoint.findUnique({
    where: { tenantId_createKey: { tenantId: scope.tenantId, createKey } },
    select: { ...endpointView, secretSealed: true },
  });
}

export async function listEndpoints(scope: TenantScope, db: DbClient): Promise<WebhookEndpointView[]> {
  return db.webhookEndpoint.findMany({
    where: { tenantId: scope.tenantId },
    orderBy: { createdAt: "asc" },
    select: endpointView,
  });
}

export async function findEndpoint(scope: TenantScope, endpointId: string, db: DbClient) {
  return db.webhookEndpoint.findFirst({
    where: { id: endpointId, tenantId: scope.tenantId },
    select: endpointView,
  });
}

export async function deleteEndpoint(scope: TenantScope, endpointId: string, db: DbClient) {
  const { count } = await db.webhookEndpoint.deleteMany({
    where: { id: endpointId, tenantId: scope.tenantId },
  });
  return count > 0;
}

/** Enabled endpoints of the tenant subscribed to `event` (the dispatch job). */
export async function endpointsFor(tenantId: string, event: string, db: DbClient) {
  return db.webhookEndpoint.findMany({
    where: { tenantId, enabled: true, events: { has: event } },
    select: { id: true },
  });
}

export async function createDelivery(
  row: { id: string; tenantId: string; endpointId: string; event: string; body: string },
  db: DbClient,
): Promise<void> {
  // Idempotent: a retried dispatch finds the rows it wrote before.
  await db.webhookDelivery.createMany({ data: [row], skipDuplicates: true });
}

/** A delivery with what sending it needs (the endpoint's URL and sealed secret), or null. */
export async function deliveryForSending(deliveryId: string, db: DbClient) {
  return db.webhookDelivery.findUnique({
    where: { id: deliveryId },
    select: {
      id: true,
      tenantId: true,
      event: true,
      body: true,
      status: true,
      endpoint: { select: { id: true, url: true, secretSealed: true, enabled: true } },
    },
  });
}

/** Records one attempt (idempotent per attempt number: a retried job re-records, never duplicates). */
export async function recordAttempt(
  deliveryId: string,
  attempt: { attempt: number; statusCode: number | null; response: string; durationMs: number },
  finalStatus: "succeeded" | "failed" | null,
  db: DbClient,
): Promise<void> {
  await db.$transaction([
    db.webhookAttempt.upsert({
      where: { deliveryId_attempt: { deliveryId, attempt: attempt.attempt } },
      create: { deliveryId, ...attempt },
      update: attempt,
    }),
    ...(finalStatus
      ? [
          db.webhookDelivery.update({
            where: { id: deliveryId },
            data: { status: finalStatus, finishedAt: new Date() },
          }),
        ]
      : []),
  ]);
}

export async function markDeliveryFailed(deliveryId: string, db: DbClient): Promise<void> {
  await db.webhookDelivery.update({
    where: { id: deliveryId },
    data: { status: "failed", finishedAt: new Date() },
  });
}

/** The tenant's newest deliveries (optionally of one endpoint), each with every attempt. */
export async function listDeliveries(
  scope: TenantScope,
  filter: { endpointId?: string | undefined; limit: number },
  db: DbClient,
): Promise<WebhookDeliveryView[]> {
  return db.webhookDelivery.findMany({
    where: { tenantId: scope.tenantId, ...(filter.endpointId ? { endpointId: filter.endpointId } : {}) },
    orderBy: { createdAt: "desc" },
    take: filter.limit,
    select: {
      id: true,
      endpointId: true,
      event: true,
      status: true,
      createdAt: true,
      finishedAt: true,
      attempts: {
        orderBy: { attempt: "asc" },
        select: { attempt: true, statusCode: true, response: true, durationMs: true, at: true },
      },
    },
  });
}
