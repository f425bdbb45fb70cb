import { announceChange } from "./change-feed";

type JobLike = { id?: string | undefined; name: string; data: unknown };

/**
 * A job of a tenant started, completed or failed (the workers tell it): the jobs page refetches, and a job
 * on a workspace (provision, stop, purge, ...) refreshes that workspace's row too, since its end is when the
 * state it wrote is committed. Jobs without a tenant (sweeps, audit flushes) are nobody's page.
 */
export function announceJobChange(job: JobLike, state: "active" | "completed" | "failed"): void {
  const data = (job.data ?? {}) as { tenantId?: unknown; workspaceId?: unknown };
  if (typeof data.tenantId !== "string") return;
  announceChange(data.tenantId, { topic: "job", id: job.id ?? "", name: job.name, state });
  if (state !== "active" && typeof data.workspaceId === "string") {
    announceChange(data.tenantId, { topic: "workspace", id: data.workspaceId });
  }
}
