"use client";

import { useInfiniteQuery, useQuery, useQueryClient } from "@tanstack/react-query";
import { Download, ScrollText } from "lucide-react";
import Link from "next/link";
import { useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card } from "@/app/_components/ui/card";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { useTRPC } from "@/app/_trpc/client";
import type { AuditLogView } from "@/server/modules/audit/audit.types";
import { LoadMore } from "../_components/load-more";
import { type AuditFilterState, AuditFilters, auditFilterInput, NO_AUDIT_FILTERS } from "./audit-filters";

const PAGE_SIZE = 50;

/** Where a target lives in the dashboard, when it has a page. */
function targetHref(base: string, entry: AuditLogView): string | null {
  if (!entry.targetId) return null;
  const id = encodeURIComponent(entry.targetId);
  switch (entry.targetType ?? "") {
    case "agent":
      return `${base}/agents/${id}`;
    case "session":
      return `${base}/sessions/${id}`;
    case "workspace":
      return `${base}/workspaces/${id}`;
    case "user":
    case "invitation":
      return `${base}/members`;
    case "api_key":
      return `${base}/api-keys`;
    case "job":
      return `${base}/jobs`;
    default:
      return null;
  }
}

function actorLabel(entry: AuditLogView): string {
  if (!entry.actorId) return entry.actorType;
  return entry.actorName ?? `${entry.actorType} ${entry.actorId.slice(0, 8)}`;
}

function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: "text/csv;charset=utf-8" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.click();
  URL.revokeObjectURL(url);
}

/**
 * The audit log, filtered on the server (actor, action, target, outcome, time range) and paged with "Load
 * more"; the CSV export asks the server for the same filtered rows (not only the loaded pages).
 */
export function AuditTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const [filters, setFilters] = useState<AuditFilterState>(NO_AUDIT_FILTERS);
  const [exporting, setExporting] = useState(false);
  const input = { tenantSlug, ...auditFilterInput(filters) };
  const facets = useQuery(trpc.audit.facets.queryOptions({ tenantSlug }));
  const audit = useInfiniteQuery(
    trpc.audit.list.infiniteQueryOptions(
      { ...input, limit: PAGE_SIZE },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  const entries = audit.data?.pages.flatMap((page) => page.items) ?? [];
  const filtered = Object.values(filters).some(Boolean);

  async function exportCsv() {
    setExporting(true);
    try {
      const result = await queryClient.fetchQuery(trpc.audit.exportCsv.queryOptions(input, { staleTime: 0 }));
      download(`audit-${tenantSlug}-${new Date().toISOString().slice(0, 10)}.csv`, result.csv);
      if (result.truncated)
        toast.warning(`Exported the newest ${result.rows} entries only: narrow the filters.`);
      else toast.success(`Exported ${result.rows} entries.`);
    } catch (error) {
      toast.error(error instanceof Error ? error.message : String(error));
    } finally {
      setExporting(false);
    }
  }

  const columns: ColumnDef<AuditLogView, unknown>[] = [
    {
      id: "at",
      header: "When",
      accessorFn: (entry) => entry.at.getTime(),
      cell: ({ row: { original: entry } }) => <RelativeTime value={entry.at} />,
    },
    {
      id: "action",
      header: "Action",
      accessorFn: (entry) => entry.action,
      cell: ({ getValue }) => <code className="text-xs">{String(getValue())}</code>,
    },
    {
      id: "actor",
      header: "Actor",
      accessorFn: actorLabel,
      cell: ({ row: { original: entry } }) => (
        <span title={entry.actorId ?? undefined} data-testid="audit-actor">
          {actorLabel(entry)}
        </span>
      ),
    },
    {
      id: "target",
      header: "Target",
      accessorFn: (entry) => `${entry.targetType ?? ""} ${entry.targetId ?? ""}`,
      cell: ({ row: { original: entry } }) => {
        const href = targetHref(base, entry);
        const label = (
          <>
            <span className="text-muted-foreground">{entry.targetType ?? "—"}</span>{" "}
            {entry.targetId && <code className="text-xs">{entry.targetId.slice(0, 16)}</code>}
          </>
        );
        return href ? (
          <Link href={href} className="hover:underline" title={entry.targetId ?? undefined}>
            {label}
          </Link>
        ) : (
          label
        );
      },
    },
    {
      id: "outcome",
      header: "Outcome",
      accessorFn: (entry) => entry.outcome,
      cell: ({ row: { original: entry } }) => (
        <div className="max-w-80">
          <Badge tone={entry.outcome === "success" ? "success" : "danger"} data-testid="audit-outcome">
            {entry.outcome}
          </Badge>
          {entry.reason && (
            <div className="text-muted-foreground mt-1 line-clamp-3 text-xs" data-testid="audit-reason">
              {entry.reason}
            </div>
          )}
        </div>
      ),
    },
  ];

  return (
    <Card>
      {audit.error ? (
        <div className="p-5">
          <Alert>{audit.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Audit log"
          columns={columns}
          data={entries}
          loading={!audit.data}
          rowTestId="audit-row"
          pageSize={PAGE_SIZE * 4}
          toolbar={
            <>
              <AuditFilters value={filters} onChange={setFilters} facets={facets.data} />
              <Button
                variant="outline"
                size="sm"
                className="ml-auto"
                onClick={() => void exportCsv()}
                disabled={exporting || entries.length === 0}
              >
                <Download /> {exporting ? "Exporting…" : "Export CSV"}
              </Button>
            </>
          }
          empty={
            <EmptyState
              icon={ScrollText}
              title={filtered ? "No entry matches these filters" : "Nothing recorded yet"}
            />
          }
        />
      )}
      <LoadMore query={audit} />
    </Card>
  );
}
