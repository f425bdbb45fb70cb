"use client";

import { useQuery } from "@tanstack/react-query";
import { Receipt } from "lucide-react";
import { Card, CardContent, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";

const POLL_MS = 1_000;

/** The receipt's `deleted` as the purge job writes it (purge/workspace-purge.service.ts); every field optional. */
type Deleted = {
  reason?: string;
  generation?: number;
  backend?: string;
  resources?: unknown;
  skills?: string[];
  mcpDeclarations?: string[];
  offloadFiles?: number;
  dataFiles?: number;
  databaseRows?: Record<string, number>;
};

const plural = (count: number, one: string, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

function List({ label, items }: { label: string; items: string[] | undefined }) {
  if (!items) return null;
  return (
    <div className="grid gap-1">
      <dt className="text-muted-foreground text-xs">{label}</dt>
      <dd className="text-sm">
        {items.length === 0 ? (
          <span className="text-muted-foreground">none</span>
        ) : (
          <ul className="flex flex-wrap gap-1">
            {items.map((item) => (
              <li key={item}>
                <code className="bg-muted rounded px-1.5 py-0.5 text-xs">{item}</code>
              </li>
            ))}
          </ul>
        )}
      </dd>
    </div>
  );
}

function Fact({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div className="grid gap-1">
      <dt className="text-muted-foreground text-xs">{label}</dt>
      <dd className="text-sm">{children}</dd>
    </div>
  );
}

/** What purges of this workspace deleted, when and at whose request. Admin-only in the API. */
export function PurgeReceipts({
  tenantSlug,
  workspaceId,
  waitForReceipt,
}: {
  tenantSlug: string;
  workspaceId: string;
  waitForReceipt: boolean;
}) {
  const trpc = useTRPC();
  const receipts = useQuery(
    trpc.workspace.purgeReceipts.queryOptions(
      { tenantSlug, targetType: "workspace", targetId: workspaceId, limit: 20 },
      {
        retry: false,
        // The receipt is written by the purge job after the state change: poll until it is there.
        refetchInterval: (query) => (waitForReceipt && query.state.data?.length === 0 ? POLL_MS : false),
      },
    ),
  );
  if (receipts.error) {
    return (
      <Card>
        <CardContent className="text-muted-foreground text-sm">
          {receipts.error.data?.code === "FORBIDDEN"
            ? "Purge receipts are visible to admins only."
            : receipts.error.message}
        </CardContent>
      </Card>
    );
  }
  if (!receipts.data) return <Skeleton className="h-24 w-full" />;
  if (receipts.data.length === 0) {
    return (
      <Card>
        <EmptyState
          icon={Receipt}
          title="Never purged"
          description="A purge leaves a receipt of what it deleted."
        />
      </Card>
    );
  }
  return (
    <div className="grid gap-4">
      {receipts.data.map((receipt) => {
        const deleted = (receipt.deleted ?? {}) as Deleted;
        return (
          <Card key={receipt.id} data-testid="purge-receipt">
            <CardHeader>
              <CardTitle>
                Generation {deleted.generation ?? "?"} purged <RelativeTime value={receipt.at} />
              </CardTitle>
              <span className="text-muted-foreground text-xs" data-testid="purge-receipt-by">
                by {receipt.requestedByName ?? receipt.requestedBy}
              </span>
            </CardHeader>
            <CardContent>
              <dl className="grid gap-4 sm:grid-cols-2">
                {deleted.reason && <Fact label="Reason">{deleted.reason}</Fact>}
                {deleted.backend && (
                  <Fact label="Backend">
                    <code className="text-xs">{deleted.backend}</code>
                  </Fact>
                )}
                <List label="Skills deleted" items={deleted.skills} />
                <List label="MCP declarations deleted (agent/session/name)" items={deleted.mcpDeclarations} />
                {deleted.dataFiles !== undefined && (
                  <Fact label="Work files deleted (data/)">
                    <span data-testid="purge-receipt-data-files">{plural(deleted.dataFiles, "file")}</span>
                  </Fact>
                )}
                {deleted.offloadFiles !== undefined && (
                  <Fact label="Offload files deleted (sessions/)">
                    {plural(deleted.offloadFiles, "file")}
                  </Fact>
                )}
                {deleted.databaseRows && (
                  <Fact label="Database rows">
                    {Object.entries(deleted.databaseRows)
                      .map(([table, count]) => `${count} ${table}`)
                      .join(", ") || "none"}
                  </Fact>
                )}
              </dl>
              {deleted.resources !== undefined && (
                <details className="mt-4 text-xs">
                  <summary className="text-muted-foreground cursor-pointer">Backend resources</summary>
                  <pre className="bg-muted/40 mt-2 overflow-auto rounded-md border p-3 font-mono">
                    {JSON.stringify(deleted.resources, null, 2)}
                  </pre>
                </details>
              )}
            </CardContent>
          </Card>
        );
      })}
    </div>
  );
}
