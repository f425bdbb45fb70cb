"use client";

import type { inferRouterOutputs } from "@trpc/server";
import Link from "next/link";
import type { ReactNode } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Card, CardContent, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { CopyableId } from "@/app/_components/ui/copy-button";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import type { AppRouter } from "@/server/api/root";
import { BackendLabel, formatDuration, WorkspaceStateBadge } from "../workspace-format";

type WorkspaceView = inferRouterOutputs<AppRouter>["workspace"]["get"];

const ISOLATION: Record<string, string> = {
  PER_AGENT: "one workspace per agent",
  PER_SESSION: "one workspace per session",
  PER_USER: "one workspace per user",
};

function Row({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="grid gap-1 sm:grid-cols-[10rem_1fr] sm:gap-4">
      <dt className="text-muted-foreground text-sm">{label}</dt>
      <dd className="min-w-0 text-sm">{children}</dd>
    </div>
  );
}

/**
 * Why a running workspace is still running: only work keeps it (turns, API calls that change it, the idle
 * timer their last use set); browsing this page never does.
 */
function StillAlive({ liveness }: { liveness: WorkspaceView["liveness"] }) {
  if (!liveness.running) return <span className="text-muted-foreground">not running</span>;
  return (
    <ul className="grid gap-1" data-testid="workspace-liveness">
      {liveness.reasons.map((reason, index) => (
        <li key={index}>
          {reason.text}
          {reason.until && (
            <span className="text-muted-foreground text-xs">
              {" "}
              (until <RelativeTime value={reason.until} />)
            </span>
          )}
        </li>
      ))}
      {liveness.reasons.length === 0 && <li>nothing: the next sweep stops it</li>}
      <li className="text-muted-foreground text-xs">Viewing files or this page does not keep it running.</li>
    </ul>
  );
}

/** The workspace at a glance: its state and why, where it runs, whose it is, and the leases that hold it. */
export function WorkspaceOverview({ tenantSlug, data }: { tenantSlug: string; data: WorkspaceView }) {
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const why = data.lastTransition;
  return (
    <div className="grid gap-5">
      <Card>
        <CardHeader>
          <CardTitle>Summary</CardTitle>
        </CardHeader>
        <CardContent>
          <dl className="grid gap-3" data-testid="workspace-summary">
            <Row label="State">
              <div className="flex flex-wrap items-center gap-2">
                <WorkspaceStateBadge state={data.state} />
                <span className="text-muted-foreground text-xs">
                  since <RelativeTime value={data.stateChangedAt} />
                </span>
              </div>
              {why?.reason && (
                <div className="mt-1 text-sm" data-testid="state-reason">
                  Why: {why.reason} <span className="text-muted-foreground">({why.kind})</span>
                </div>
              )}
              {data.error && <Alert className="mt-2">{data.error}</Alert>}
              {data.state === "PURGED" && (
                <p className="text-muted-foreground mt-1 text-xs" data-testid="purged-note">
                  Its sessions still work: their next use starts generation {data.generation + 1}, empty.
                </p>
              )}
            </Row>
            <Row label="Generation">
              <span data-testid="workspace-generation">{data.generation}</span>
            </Row>
            <Row label="Backend">
              <BackendLabel kind={data.backendKind} trustedOnly={data.trustedOnly} />
            </Row>
            <Row label="Isolation">{ISOLATION[data.isolationPolicy] ?? data.isolationPolicy}</Row>
            <Row label="Agent">
              {data.agentId ? (
                <Link className="hover:underline" href={`${base}/agents/${encodeURIComponent(data.agentId)}`}>
                  {data.agentName ?? <CopyableId value={data.agentId} />}
                </Link>
              ) : (
                <span className="text-muted-foreground">—</span>
              )}
            </Row>
            <Row label="Idle">{formatDuration(data.idleMs)}</Row>
            <Row label="Kept alive by">
              <StillAlive liveness={data.liveness} />
            </Row>
            <Row label="Last activity">
              <RelativeTime value={data.lastActivityAt} />
            </Row>
            <Row label="Created">
              <RelativeTime value={data.createdAt} />
            </Row>
          </dl>
        </CardContent>
      </Card>

      <Card>
        <CardHeader>
          <CardTitle>Active leases ({data.leases.length})</CardTitle>
        </CardHeader>
        {data.leases.length === 0 ? (
          <CardContent className="text-muted-foreground text-sm">
            No leases: nothing is using this workspace, so it may be stopped when idle.
          </CardContent>
        ) : (
          <Table aria-label="Active leases">
            <TableHeader>
              <TableRow className="hover:bg-transparent">
                <TableHead>Holder</TableHead>
                <TableHead>Reason</TableHead>
                <TableHead>Since</TableHead>
                <TableHead>Expires</TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {data.leases.map((lease) => (
                <TableRow key={lease.id} data-testid="lease-row">
                  <TableCell className="font-mono text-xs">{lease.holder}</TableCell>
                  <TableCell>{lease.reason ?? "—"}</TableCell>
                  <TableCell>
                    <RelativeTime value={lease.createdAt} />
                  </TableCell>
                  <TableCell>
                    {lease.expiresAt ? <RelativeTime value={lease.expiresAt} /> : "never"}
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        )}
      </Card>
    </div>
  );
}
