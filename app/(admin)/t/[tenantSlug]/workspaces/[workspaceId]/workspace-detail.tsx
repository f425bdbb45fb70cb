"use client";

import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import type { WorkspaceEventKind } from "@/server/modules/workspace/workspace.types";
import {
  BackendLabel,
  formatDate,
  formatDuration,
  TRANSITIONAL_STATES,
  WorkspaceStateBadge,
} from "../workspace-format";
import { PurgeReceipts } from "./purge-receipts";
import { WorkspaceActions } from "./workspace-actions";
import { WorkspaceFiles } from "./workspace-files";
import { WorkspaceMcps } from "./workspace-mcps";
import { WorkspaceSkills } from "./workspace-skills";

const POLL_MS = 1_000;

/** Ledger entries that are state changes: the newest one says why the workspace is in its state. */
const TRANSITION_KINDS: readonly WorkspaceEventKind[] = [
  "provisioning",
  "provisioned",
  "stopping",
  "stopped",
  "purging",
  "purged",
  "failed",
];

function transitionOf(data: unknown): string | null {
  if (!data || typeof data !== "object") return null;
  const { from, to } = data as { from?: unknown; to?: unknown };
  return typeof from === "string" && typeof to === "string" ? `${from} → ${to}` : null;
}

export function WorkspaceDetail({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const trpc = useTRPC();
  // Set once a purge is requested: its job runs in a worker, so the page polls until it lands.
  const [purgeRequested, setPurgeRequested] = useState(false);
  const workspace = useQuery(
    trpc.workspace.get.queryOptions(
      { tenantSlug, workspaceId },
      {
        refetchInterval: (query) => {
          const state = query.state.data?.state;
          if (!state) return false;
          if (TRANSITIONAL_STATES.includes(state)) return POLL_MS;
          return purgeRequested && state !== "PURGED" ? POLL_MS : false;
        },
      },
    ),
  );

  if (workspace.error) {
    return (
      <div className="alert error" role="alert">
        {workspace.error.message}
      </div>
    );
  }
  if (!workspace.data) return <p className="muted">Loading…</p>;
  const data = workspace.data;
  const why = data.events.find((event) => TRANSITION_KINDS.includes(event.kind));

  return (
    <>
      <section className="panel" aria-labelledby="summary-heading">
        <h2 id="summary-heading">Summary</h2>
        <table className="data" data-testid="workspace-summary">
          <tbody>
            <tr>
              <th scope="row">State</th>
              <td>
                <WorkspaceStateBadge state={data.state} />{" "}
                <span className="muted">since {formatDate(data.stateChangedAt)}</span>
                {why?.reason && (
                  <div data-testid="state-reason">
                    Why: {why.reason}
                    <span className="muted"> ({why.kind})</span>
                  </div>
                )}
                {data.error && <div className="alert error">{data.error}</div>}
                {data.state === "PURGED" && (
                  <div className="muted" data-testid="purged-note">
                    Its sessions still work: their next use starts generation {data.generation + 1}, empty.
                  </div>
                )}
              </td>
            </tr>
            <tr>
              <th scope="row">Generation</th>
              <td data-testid="workspace-generation">{data.generation}</td>
            </tr>
            <tr>
              <th scope="row">Backend</th>
              <td>
                <BackendLabel kind={data.backendKind} trustedOnly={data.trustedOnly} />
              </td>
            </tr>
            <tr>
              <th scope="row">Isolation</th>
              <td>{data.isolationPolicy}</td>
            </tr>
            <tr>
              <th scope="row">Agent</th>
              <td className="mono">{data.agentId ?? "—"}</td>
            </tr>
            <tr>
              <th scope="row">Idle</th>
              <td>{formatDuration(data.idleMs)}</td>
            </tr>
            <tr>
              <th scope="row">Last activity</th>
              <td>{formatDate(data.lastActivityAt)}</td>
            </tr>
            <tr>
              <th scope="row">Created</th>
              <td>{formatDate(data.createdAt)}</td>
            </tr>
          </tbody>
        </table>
      </section>

      <WorkspaceActions
        tenantSlug={tenantSlug}
        workspaceId={workspaceId}
        state={data.state}
        generation={data.generation}
        activeLeases={data.activeLeases}
        onPurgeRequested={() => setPurgeRequested(true)}
      />

      {data.state === "READY" ? (
        <>
          <WorkspaceFiles tenantSlug={tenantSlug} workspaceId={workspaceId} />
          <WorkspaceSkills tenantSlug={tenantSlug} workspaceId={workspaceId} agentId={data.agentId} />
          <WorkspaceMcps tenantSlug={tenantSlug} workspaceId={workspaceId} agentId={data.agentId} />
        </>
      ) : (
        <section className="panel" aria-labelledby="contents-heading">
          <h2 id="contents-heading">Files, skills and MCP servers</h2>
          <p className="muted" data-testid="contents-note">
            Shown while the workspace is ready: opening them now would start it again.
          </p>
        </section>
      )}

      <section className="panel" aria-labelledby="leases-heading">
        <h2 id="leases-heading">Active leases ({data.leases.length})</h2>
        {data.leases.length === 0 ? (
          <p className="muted">No leases: nothing is using this workspace, so it may be stopped when idle.</p>
        ) : (
          <table className="data">
            <thead>
              <tr>
                <th>Holder</th>
                <th>Reason</th>
                <th>Since</th>
                <th>Expires</th>
              </tr>
            </thead>
            <tbody>
              {data.leases.map((lease) => (
                <tr key={lease.id} data-testid="lease-row">
                  <td className="mono">{lease.holder}</td>
                  <td>{lease.reason ?? "—"}</td>
                  <td>{formatDate(lease.createdAt)}</td>
                  <td>{lease.expiresAt ? formatDate(lease.expiresAt) : "never"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>

      <section className="panel" aria-labelledby="events-heading">
        <h2 id="events-heading">Events</h2>
        {data.events.length === 0 ? (
          <p className="muted">Nothing recorded yet.</p>
        ) : (
          <table className="data">
            <thead>
              <tr>
                <th>When</th>
                <th>Event</th>
                <th>Reason</th>
                <th>Change</th>
                <th>Actor</th>
              </tr>
            </thead>
            <tbody>
              {data.events.map((event) => (
                <tr key={event.id} data-testid="event-row">
                  <td>{formatDate(event.at)}</td>
                  <td className="mono">{event.kind}</td>
                  <td>{event.reason ?? "—"}</td>
                  <td className="mono">{transitionOf(event.data) ?? ""}</td>
                  <td className="mono">{event.actor}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>

      <PurgeReceipts
        tenantSlug={tenantSlug}
        workspaceId={workspaceId}
        waitForReceipt={purgeRequested || data.state === "PURGED"}
      />
    </>
  );
}
