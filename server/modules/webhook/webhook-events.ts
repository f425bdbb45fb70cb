import { getLogger } from "@/server/logger";
import { enqueue } from "@/server/queue/enqueue";
import type { TWebhookEvent } from "./webhook.types";

type EventData = Record<string, string | number | boolean | null>;

/**
 * Announces a lifecycle event to the tenant's webhooks: one un-awaited `webhook.dispatch` enqueue (the job
 * finds the subscribed endpoints), so a provision, a stop or a turn never waits on webhooks, and a Redis
 * hiccup costs a warning, not the operation.
 */
export function emitLifecycleEvent(tenantId: string, event: TWebhookEvent, data: EventData): void {
  void enqueue("webhook.dispatch", { tenantId, event, occurredAt: new Date().toISOString(), data }).catch(
    (error: unknown) =>
      getLogger().warn({ err: error, event, tenantId }, "could not enqueue a webhook event"),
  );
}

/** `workspace.created`, when a binding row was inserted (not when an existing one was found). */
export function announceWorkspaceCreated(
  tenantId: string,
  workspace: { id: string; backendKind: string; agentId: string | null },
): void {
  emitLifecycleEvent(tenantId, "workspace.created", {
    workspaceId: workspace.id,
    backend: workspace.backendKind,
    agentId: workspace.agentId,
  });
}
