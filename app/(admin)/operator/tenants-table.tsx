"use client";

import { useQuery } from "@tanstack/react-query";
import { Building2 } from "lucide-react";
import Link from "next/link";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Card } from "@/app/_components/ui/card";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { useTRPC } from "@/app/_trpc/client";
import type { OperatorTenantView } from "@/server/modules/operator/operator.types";

/** A sortable column of one of the tenant's usage counts. */
const countColumn = (
  id: string,
  header: string,
  count: (tenant: OperatorTenantView) => number,
): ColumnDef<OperatorTenantView, unknown> => ({
  id,
  header,
  accessorFn: count,
  cell: ({ row: { original: tenant } }) => <span className="tabular-nums">{count(tenant)}</span>,
});

const columns: ColumnDef<OperatorTenantView, unknown>[] = [
  {
    id: "name",
    header: "Tenant",
    accessorFn: (tenant) => `${tenant.name} ${tenant.slug}`,
    cell: ({ row: { original: tenant } }) => (
      <Link href={`/operator/tenants/${tenant.id}`} className="font-medium hover:underline">
        {tenant.name} <span className="text-muted-foreground font-normal">/{tenant.slug}</span>
      </Link>
    ),
  },
  {
    id: "status",
    header: "Status",
    accessorFn: (tenant) => tenant.status,
    cell: ({ row: { original: tenant } }) => <StateBadge state={tenant.status} />,
  },
  countColumn("members", "Members", (t) => t.usage.members),
  countColumn("agents", "Agents", (t) => t.usage.agents),
  {
    id: "workspaces",
    header: "Workspaces (live / total)",
    accessorFn: (t) => t.usage.workspacesLive,
    cell: ({ row: { original: t } }) => (
      <span className="tabular-nums">
        {t.usage.workspacesLive} / {t.usage.workspacesTotal}
      </span>
    ),
  },
  countColumn("sessions", "Sessions", (t) => t.usage.sessions),
  {
    id: "created",
    header: "Created",
    accessorFn: (t) => t.createdAt.getTime(),
    cell: ({ row: { original: t } }) => <RelativeTime value={t.createdAt} />,
  },
];

export function TenantsTable() {
  const trpc = useTRPC();
  const tenants = useQuery(trpc.operator.tenants.list.queryOptions());
  if (tenants.error) return <Alert>{tenants.error.message}</Alert>;
  return (
    <Card>
      <DataTable
        label="Tenants"
        columns={columns}
        data={tenants.data ?? []}
        loading={tenants.isPending}
        filterPlaceholder="Filter tenants"
        rowTestId="tenant-row"
        empty={<EmptyState icon={Building2} title="No tenants" />}
      />
    </Card>
  );
}
