import { z } from "zod";
import { ZIdempotencyKey } from "@/server/shared/idempotency";

/** The lifecycle events a tenant's endpoints can receive (`webhook.test` is sent by the Test button only). */
export const WEBHOOK_EVENTS = [
  "workspace.created",
  "workspace.ready",
  "workspace.stopped",
  "workspace.purged",
  "workspace.failed",
  "turn.completed",
  "turn.failed",
  "budget.threshold_reached",
  "budget.exhausted",
] as const;
const ZWebhookEvent = z.enum(WEBHOOK_EVENTS);
export type TWebhookEvent = z.infer<typeof ZWebhookEvent>;
export const ZDeliveredEvent = z.union([ZWebhookEvent, z.literal("webhook.test")]);

export const ZWebhookEndpointCreate = z.object({
  url: z.string().trim().min(1).max(2_000),
  description: z.string().trim().max(200).default(""),
  events: z.array(ZWebhookEvent).min(1).max(WEBHOOK_EVENTS.length),
  /** The same key from the same caller within 24 hours returns the first endpoint (and its secret). */
  idempotencyKey: ZIdempotencyKey.optional(),
});

export const ZWebhookEndpointView = z.object({
  id: z.string(),
  url: z.string(),
  description: z.string(),
  events: z.array(z.string()),
  enabled: z.boolean(),
  createdAt: z.date(),
});
export type WebhookEndpointView = z.infer<typeof ZWebhookEndpointView>;

const ZWebhookAttemptView = z.object({
  attempt: z.number().int(),
  statusCode: z.number().int().nullable(),
  response: z.string(),
  durationMs: z.number().int(),
  at: z.date(),
});

export const ZWebhookDeliveryView = z.object({
  id: z.string(),
  endpointId: z.string(),
  event: z.string(),
  status: z.enum(["pending", "succeeded", "failed"]),
  createdAt: z.date(),
  finishedAt: z.date().nullable(),
  attempts: z.array(ZWebhookAttemptView),
});
export type WebhookDeliveryView = z.infer<typeof ZWebhookDeliveryView>;
