import { z } from "zod";
import { JOB_RETENTION } from "@/server/queue/retention";
import { deterministicJobId, defineJob } from "@/server/queue/types";
import { ZDeliveredEvent } from "./webhook.types";

export const ZWebhookDispatchPayload = z.object({
  tenantId: z.string().min(1).max(200),
  event: ZDeliveredEvent,
  occurredAt: z.iso.datetime(),
  /** Facts about the event (ids, states, outcome): never secrets or message text. */
  data: z.record(z.string(), z.union([z.string().max(4_000), z.number(), z.boolean(), z.null()])),
  /** Only this endpoint (the Test button); otherwise every enabled endpoint subscribed to the event. */
  endpointId: z.string().min(1).max(200).optional(),
});

export const ZWebhookDeliverPayload = z.object({ deliveryId: z.string().min(1).max(200) });

/**
 * `webhook.dispatch` fans one event out to a delivery per subscribed endpoint; `webhook.deliver` posts one
 * delivery, one attempt per job attempt, with exponential backoff (1 s, 2 s, 4 s, ... over 8 attempts).
 */
export const webhookJobs = {
  "webhook.dispatch": defineJob({
    queue: "webhook",
    schema: ZWebhookDispatchPayload,
    options: {
      attempts: 5,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: { age: 60 * 60, count: 1_000 },
      removeOnFail: JOB_RETENTION.failed,
    },
  }),
  "webhook.deliver": defineJob({
    queue: "webhook",
    schema: ZWebhookDeliverPayload,
    options: {
      attempts: 8,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: JOB_RETENTION.completed,
      removeOnFail: JOB_RETENTION.failed,
    },
    jobId: (p) => deterministicJobId("webhook.deliver", p.deliveryId),
  }),
} as const;
