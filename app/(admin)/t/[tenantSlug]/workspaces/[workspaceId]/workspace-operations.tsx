"use client";

import { WorkspaceResources } from "./workspace-resources";
import { WorkspaceTimeline } from "./workspace-timeline";
import { WorkspaceTimings } from "./workspace-timings";

/**
 * The workspace page's Operations tab: its CPU, memory and disk over time, how long its stages take, and
 * its lifecycle on a timeline.
 */
export function WorkspaceOperations({
  tenantSlug,
  workspaceId,
  live,
}: {
  tenantSlug: string;
  workspaceId: string;
  live: boolean;
}) {
  return (
    <div className="grid gap-5">
      <WorkspaceResources tenantSlug={tenantSlug} workspaceId={workspaceId} />
      <WorkspaceTimings tenantSlug={tenantSlug} workspaceId={workspaceId} />
      <WorkspaceTimeline tenantSlug={tenantSlug} workspaceId={workspaceId} live={live} />
    </div>
  );
}
