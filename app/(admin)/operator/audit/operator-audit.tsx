"use client";

import { useQuery } from "@tanstack/react-query";
import { ScrollText } from "lucide-react";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Card, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { useTRPC } from "@/app/_trpc/client";
import type { OperatorAuditView } from "@/server/modules/operator/operator.types";

const columns: ColumnDef<OperatorAuditView, unknown>[] = [
  {
    id: "at",
    header: "When",
    accessorFn: (r) => r.at.getTime(),
    cell: ({ row }) => <RelativeTime value={row.original.at} />,
  },
  {
    id: "action",
    header: "Action",
    accessorFn: (r) => r.action,
    cell: ({ row }) => <code className="text-xs">{row.original.action}</code>,
  },
  { id: "target", header: "Target", accessorFn: (r) => r.targetLabel ?? r.targetId },
  { id: "actor", header: "By", accessorFn: (r) => r.actorEmail ?? r.actorId ?? r.actorType },
  {
    id: "outcome",
    header: "Outcome",
    accessorFn: (r) => r.outcome,
    cell: ({ row }) => <StateBadge state={row.original.outcome} />,
  },
];

export function OperatorAudit() {
  const trpc = useTRPC();
  const audit = useQuery(trpc.operator.audit.queryOptions({ limit: 500 }));
  const receipts = useQuery(trpc.operator.tenants.deletionReceipts.queryOptions());
  if (audit.error) return <Alert>{audit.error.message}</Alert>;
  return (
    <div className="grid gap-6">
      <Card>
        <DataTable
          label="Operator audit"
          columns={columns}
          data={audit.data ?? []}
          loading={audit.isPending}
          filterPlaceholder="Filter"
          rowTestId="operator-audit-row"
          empty={<EmptyState icon={ScrollText} title="Nothing yet" />}
        />
      </Card>
      <Card>
        <CardHeader>
          <CardTitle>Deletion receipts</CardTitle>
          <CardDescription>
            What deleting each tenant deleted: its workspaces, per backend, and its rows.
          </CardDescription>
        </CardHeader>
        <ul className="grid gap-2 px-5 pb-5 text-sm">
          {(receipts.data ?? []).length === 0 && (
            <li className="text-muted-foreground">No tenant deleted.</li>
          )}
          {(receipts.data ?? []).map((receipt) => (
            <li key={receipt.id}>
              <details>
                <summary className="cursor-pointer">
                  {receipt.tenantName} <span className="text-muted-foreground">/{receipt.tenantSlug}</span> ·{" "}
                  <RelativeTime value={receipt.at} /> · by {receipt.actor}
                </summary>
                <pre className="bg-muted mt-2 max-h-80 overflow-auto rounded p-3 text-xs">
                  {JSON.stringify(receipt.deleted, null, 2)}
                </pre>
              </details>
            </li>
          ))}
        </ul>
      </Card>
    </div>
  );
}
