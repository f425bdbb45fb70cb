import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import {
  deliverWebhook,
  dispatchWebhookEvent,
  type WebhookDeliveryDeps,
} from "@/server/modules/webhook/webhook-delivery.service";
import type { ProcessorRegistry } from "../registry";

/** `webhook.dispatch` and `webhook.deliver` (transport-thin; the registry maps the retryable error to a retry). */
export function registerWebhookProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  deps: Omit<WebhookDeliveryDeps, "requestDelivery"> & { queues: QueueSet<BerthJobCatalog> },
): void {
  const enqueue = createEnqueue(deps.queues);
  const delivery: WebhookDeliveryDeps = {
    ...deps,
    requestDelivery: (deliveryId) => enqueue("webhook.deliver", { deliveryId }),
  };
  registry
    .registerProcessor("webhook.dispatch", ({ payload, job }) =>
      dispatchWebhookEvent(delivery, payload, job.id),
    )
    .registerProcessor("webhook.deliver", ({ payload, job }) => {
      const number = job.attemptsMade + 1;
      return deliverWebhook(delivery, payload, { number, isLast: number >= (job.opts.attempts ?? 1) });
    });
}
