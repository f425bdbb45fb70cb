import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { decryptSecret, encryptSecret, type SecretKey } from "@/server/auth/secrets";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { AppError } from "@/server/shared/errors";
import { createOnce, scopedCreateKey } from "@/server/shared/idempotency";
import { parseInput } from "@/server/shared/parse-input";
import {
  createEndpoint,
  deleteEndpoint,
  findEndpoint,
  findEndpointByCreateKey,
  listDeliveries,
  listEndpoints,
} from "./webhook.data";
import { sealingContext } from "./webhook-delivery.service";
import { newWebhookSecret } from "./webhook-signing";
import { ZWebhookEndpointCreate, type WebhookEndpointView } from "./webhook.types";
import { assertWebhookUrlAllowed, type WebhookUrlPolicy } from "./webhook-url-policy";
import type { Db } from "@/server/db";

/** Tenant admins' side of lifecycle webhooks: endpoints (secret shown once), test sends, delivery log. */
export function createWebhookService(deps: {
  db: Db;
  secretKey: SecretKey;
  policy: WebhookUrlPolicy;
  /** The root's queues (`webhook.test` goes through `webhook.dispatch`), built on first use. */
  queues: () => QueueSet<BerthJobCatalog>;
  /** Where changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
}) {
  const audit = (scope: TenantScope, action: string, targetId: string, details: Record<string, unknown>) =>
    deps.audit.record(scope, { action, targetType: "webhook", targetId, outcome: "success", details });

  async function requireEndpoint(scope: TenantScope, endpointId: string): Promise<WebhookEndpointView> {
    const endpoint = await findEndpoint(scope, endpointId, deps.db);
    if (!endpoint) throw new AppError("NOT_FOUND", `webhook endpoint ${endpointId} not found`);
    return endpoint;
  }

  return {
    /** Registers an endpoint; the answer holds its signing secret, which is never shown again. */
    async create(
      scope: TenantScope,
      raw: z.input<typeof ZWebhookEndpointCreate>,
    ): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
      assertCan(scope, "webhook:manage");
      const input = parseInput(ZWebhookEndpointCreate, raw);
      await assertWebhookUrlAllowed(input.url, deps.policy);
      // A key seen before answers with its endpoint and the same secret (stored sealed, so it can be
      // unsealed again), creating nothing.
      return createOnce(input.idempotencyKey ? scopedCreateKey(scope, input.idempotencyKey) : null, {
        earlier: async (createKey) => {
          const first = await findEndpointByCreateKey(scope, createKey, deps.db);
          if (!first) return null;
          const { secretSealed, ...endpoint } = first;
          const secret = decryptSecret(
            deps.secretKey,
            secretSealed,
            sealingContext(scope.tenantId, first.id),
          );
          return { result: { endpoint, secret }, createdAt: first.createdAt };
        },
        create: async (createKey) => {
          const id = randomUUID();
          const secret = newWebhookSecret();
          const endpoint = await createEndpoint(
            scope,
            {
              id,
              url: new URL(input.url).href,
              description: input.description,
              events: [...new Set(input.events)],
              secretSealed: encryptSecret(deps.secretKey, secret, sealingContext(scope.tenantId, id)),
              createKey,
            },
            deps.db,
          );
          await audit(scope, "webhook.create", id, { url: endpoint.url, events: endpoint.events });
          return { endpoint, secret };
        },
      });
    },

    async list(scope: TenantScope): Promise<WebhookEndpointView[]> {
      assertCan(scope, "webhook:manage");
      return listEndpoints(scope, deps.db);
    },

    async remove(scope: TenantScope, endpointId: string): Promise<{ deleted: boolean }> {
      assertCan(scope, "webhook:manage");
      await requireEndpoint(scope, endpointId);
      const deleted = await deleteEndpoint(scope, endpointId, deps.db);
      await audit(scope, "webhook.delete", endpointId, {});
      return { deleted };
    },

    /** Sends a `webhook.test` event to this endpoint only (through the same queue, signing and retries). */
    async test(scope: TenantScope, endpointId: string): Promise<{ queued: true }> {
      assertCan(scope, "webhook:manage");
      await requireEndpoint(scope, endpointId);
      await createEnqueue(deps.queues())("webhook.dispatch", {
        tenantId: scope.tenantId,
        event: "webhook.test",
        occurredAt: new Date().toISOString(),
        data: { endpointId },
        endpointId,
      });
      return { queued: true };
    },

    async deliveries(
      scope: TenantScope,
      filter: { endpointId?: string | undefined; limit?: number | undefined },
    ) {
      assertCan(scope, "webhook:manage");
      if (filter.endpointId) await requireEndpoint(scope, filter.endpointId);
      return listDeliveries(scope, { endpointId: filter.endpointId, limit: filter.limit ?? 50 }, deps.db);
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
