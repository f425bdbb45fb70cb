"use client";

import { useQuery } from "@tanstack/react-query";
import { Flame } from "lucide-react";
import { Alert } from "@/app/_components/ui/alert";
import { Card } from "@/app/_components/ui/card";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { useTRPC } from "@/app/_trpc/client";
import type { TWarmPoolView } from "@/server/modules/pool/warm-pool.types";

const number = (value: number) => <span className="tabular-nums">{value}</span>;

const columns: ColumnDef<TWarmPoolView, unknown>[] = [
  {
    id: "backend",
    header: "Backend",
    accessorFn: (pool) => pool.label,
    cell: ({ row: { original: pool } }) => <span className="font-medium">{pool.label}</span>,
  },
  {
    id: "idle",
    header: "Idle / target",
    accessorFn: (pool) => pool.idle,
    cell: ({ row: { original: pool } }) => (
      <span className="tabular-nums">
        {pool.idle} / {pool.target}
        {pool.creating > 0 && <span className="text-muted-foreground"> (+{pool.creating} starting)</span>}
      </span>
    ),
  },
  {
    id: "bounds",
    header: "Min – max",
    accessorFn: (pool) => pool.max,
    cell: ({ row: { original: pool } }) => (
      <span className="tabular-nums">
        {pool.min} – {pool.max}
      </span>
    ),
  },
  {
    id: "hits",
    header: "Served",
    accessorFn: (pool) => pool.hits,
    cell: ({ getValue }) => number(getValue() as number),
  },
  {
    id: "misses",
    header: "Created instead",
    accessorFn: (pool) => pool.misses,
    cell: ({ getValue }) => number(getValue() as number),
  },
  {
    id: "claim",
    header: "Bound in (p50)",
    accessorFn: (pool) => pool.claimP50Ms ?? -1,
    cell: ({ row: { original: pool } }) =>
      pool.claimP50Ms === null ? "—" : <span className="tabular-nums">{Math.round(pool.claimP50Ms)} ms</span>,
  },
];

export function WarmPoolsTable() {
  const trpc = useTRPC();
  const pools = useQuery({ ...trpc.operator.warmPools.queryOptions(), refetchInterval: 5_000 });
  if (pools.error) return <Alert>{pools.error.message}</Alert>;
  const window = pools.data?.[0]?.windowMinutes;
  return (
    <Card>
      <DataTable
        label="Warm pools"
        columns={columns}
        data={pools.data ?? []}
        loading={pools.isPending}
        rowTestId="warm-pool-row"
        empty={
          <EmptyState
            icon={Flame}
            title="No warm pools"
            description="Every first use creates its machine. Set BERTH_WARM_POOLS (for example docker:2-10) to keep machines ready."
          />
        }
      />
      {window !== undefined && (
        <p className="text-muted-foreground px-4 pb-4 text-xs">
          Served, created instead and bound in cover the last {window} minutes. Bound in runs from a first
          use's admission to its machine bound: the quota check, the claim and the bind.
        </p>
      )}
    </Card>
  );
}
