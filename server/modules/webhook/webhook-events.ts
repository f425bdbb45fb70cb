import type { Logger } from "@/server/logger";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import type { TWebhookEvent } from "./webhook.types";

type EventData = Record<string, string | number | boolean | null>;

/**
 * Announces lifecycle events to the tenants' webhooks (the root's `berth.lifecycle`): each `emit` is one
 * un-awaited `webhook.dispatch` enqueue (the job finds the subscribed endpoints), so a provision, a stop or
 * a turn never waits on webhooks, and a Redis hiccup costs a warning, not the operation.
 */
export type LifecycleEvents = {
  emit(tenantId: string, event: TWebhookEvent, data: EventData): void;
};

/** Lifecycle events over a root's queues, warning on its logger (both resolved at each emit). */
export function lifecycleEvents(deps: {
  queues: () => QueueSet<BerthJobCatalog>;
  log: () => Pick<Logger, "warn">;
}): LifecycleEvents {
  return {
    emit(tenantId, event, data) {
      void createEnqueue(deps.queues())("webhook.dispatch", {
        tenantId,
        event,
        occurredAt: new Date().toISOString(),
        data,
      }).catch((error: unknown) =>
        deps.log().warn({ err: error, event, tenantId }, "could not enqueue a webhook event"),
      );
    },
  };
}

/** `workspace.created`, when a binding row was inserted (not when an existing one was found). */
export function announceWorkspaceCreated(
  lifecycle: LifecycleEvents,
  tenantId: string,
  workspace: { id: string; backendKind: string; agentId: string | null },
): void {
  lifecycle.emit(tenantId, "workspace.created", {
    workspaceId: workspace.id,
    backend: workspace.backendKind,
    agentId: workspace.agentId,
  });
}
