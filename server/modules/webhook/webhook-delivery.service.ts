import { createHash, randomUUID } from "node:crypto";
import type { z } from "zod";
import { decryptSecret, type SecretKey } from "@/server/auth/secrets";
import { AppError, isAppError } from "@/server/shared/errors";
import {
  createDelivery,
  deliveryForSending,
  endpointsFor,
  markDeliveryFailed,
  recordAttempt,
} from "./webhook.data";
import type { ZWebhookDeliverPayload, ZWebhookDispatchPayload } from "./webhook.jobs";
import { SIGNATURE_HEADER, signWebhookBody } from "./webhook-signing";
import { webhookFetch, type WebhookUrlPolicy } from "./webhook-url-policy";
import type { Db } from "@/server/db";

/** The worker side of lifecycle webhooks: fan an event out to deliveries, then post each with retries. */
export type WebhookDeliveryDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  secretKey: SecretKey;
  policy: WebhookUrlPolicy;
  /** Enqueues `webhook.deliver` for one delivery. */
  requestDelivery: (deliveryId: string) => Promise<unknown>;
  timeoutMs?: number;
};

export function sealingContext(tenantId: string, endpointId: string): string {
  return `webhook:${tenantId}:${endpointId}`;
}

/**
 * `webhook.dispatch`: one delivery row (with its exact body) per subscribed endpoint, each enqueued. The
 * delivery id derives from the dispatch job's id and the endpoint, so a retried dispatch (after a crash
 * half-way through the endpoints) neither duplicates a delivery nor loses one.
 */
export async function dispatchWebhookEvent(
  deps: Pick<WebhookDeliveryDeps, "db" | "requestDelivery">,
  payload: z.output<typeof ZWebhookDispatchPayload>,
  dispatchId: string = randomUUID(),
): Promise<{ deliveries: number }> {
  const endpoints = payload.endpointId
    ? [{ id: payload.endpointId }]
    : await endpointsFor(payload.tenantId, payload.event, deps.db);
  for (const endpoint of endpoints) {
    const id = deliveryIdOf(dispatchId, endpoint.id);
    const body = JSON.stringify({
      id,
      event: payload.event,
      occurredAt: payload.occurredAt,
      tenantId: payload.tenantId,
      data: payload.data,
    });
    await createDelivery(
      {
        id,
        tenantId: payload.tenantId,
        endpointId: endpoint.id,
        event: payload.event,
        body,
      },
      deps.db,
    );
    await deps.requestDelivery(id);
  }
  return { deliveries: endpoints.length };
}

/** A UUID-shaped id derived from (dispatch, endpoint): stable across retries of the dispatch job. */
function deliveryIdOf(dispatchId: string, endpointId: string): string {
  const hex = createHash("sha256").update(`${dispatchId}\0${endpointId}`).digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

const RESPONSE_KEPT = 2_048;

/** The first `limit` characters of a response, without reading (or buffering) the rest of it. */
async function readPrefix(reply: Response, limit: number): Promise<string> {
  if (!reply.body) return "";
  const reader = reply.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (text.length < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return text.slice(0, limit);
}

/**
 * `webhook.deliver`, one attempt: POST the stored body, signed now, to the endpoint (through the SSRF
 * guard), and record the attempt with its status and the start of the response. A 2xx ends the delivery;
 * anything else throws a retryable error (BullMQ's backoff brings the job back) until the last attempt,
 * which marks the delivery failed. A refused address or a deleted endpoint fails it at once.
 */
export async function deliverWebhook(
  deps: Omit<WebhookDeliveryDeps, "requestDelivery">,
  payload: z.output<typeof ZWebhookDeliverPayload>,
  attempt: { number: number; isLast: boolean },
): Promise<{ status: "succeeded" | "skipped"; statusCode?: number }> {
  const delivery = await deliveryForSending(payload.deliveryId, deps.db);
  if (!delivery || delivery.status !== "pending") return { status: "skipped" };
  if (!delivery.endpoint.enabled) {
    await markDeliveryFailed(delivery.id, deps.db);
    return { status: "skipped" };
  }
  const secret = decryptSecret(
    deps.secretKey,
    delivery.endpoint.secretSealed,
    sealingContext(delivery.tenantId, delivery.endpoint.id),
  );
  const timestamp = Math.floor(Date.now() / 1000);
  const started = Date.now();
  let statusCode: number | null = null;
  let response: string;
  let refused = false;
  try {
    const reply = await webhookFetch(delivery.endpoint.url, deps.policy, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "Berth-Webhooks/1",
        "berth-event": delivery.event,
        "berth-delivery": delivery.id,
        [SIGNATURE_HEADER]: signWebhookBody(secret, delivery.body, timestamp),
      },
      body: delivery.body,
      signal: AbortSignal.timeout(deps.timeoutMs ?? 10_000),
    });
    statusCode = reply.status;
    response = await readPrefix(reply, RESPONSE_KEPT).catch(
      (error: unknown) => `(unreadable body: ${String(error)})`,
    );
  } catch (error) {
    // The URL policy's refusals (not https any more, a private address) will not change on a retry.
    refused = isAppError(error) && !error.isRetryable;
    response = (isAppError(error) ? error.userMessage : String(error)).slice(0, RESPONSE_KEPT);
  }
  const ok = statusCode !== null && statusCode >= 200 && statusCode < 300;
  const final = ok ? "succeeded" : refused || attempt.isLast ? "failed" : null;
  await recordAttempt(
    delivery.id,
    { attempt: attempt.number, statusCode, response, durationMs: Date.now() - started },
    final,
    deps.db,
  );
  if (ok) return { status: "succeeded", statusCode: statusCode! };
  const reason = statusCode === null ? response : `HTTP ${statusCode}`;
  throw new AppError(
    refused ? "FORBIDDEN" : "UNAVAILABLE",
    `webhook delivery ${delivery.id} failed: ${reason}`,
  );
}
