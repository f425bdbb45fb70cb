"use client";

import { useQuery } from "@tanstack/react-query";
import { Gauge } from "lucide-react";
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Alert } from "@/app/_components/ui/alert";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useTRPC } from "@/app/_trpc/client";
import { formatMs } from "../../readiness/stage-chart";

type Provision = {
  at: Date;
  path: string;
  ok: boolean;
  queuedMs: number | null;
  machineMs: number | null;
  gatewayMs: number | null;
  totalMs: number | null;
};

// UTC and fixed width: the same text wherever it renders.
const timeLabel = (at: Date) => at.toISOString().slice(5, 19).replace("T", " ");

/** Each recent provision as one stacked bar: queued, machine, gateway, and the rest up to READY. */
function ProvisionChart({ provisions }: { provisions: Provision[] }) {
  const rows = provisions.map((run) => {
    const parts = (run.queuedMs ?? 0) + (run.machineMs ?? 0) + (run.gatewayMs ?? 0);
    return {
      name: `${timeLabel(run.at)} ${run.path}${run.ok ? "" : " (failed)"}`,
      queued: run.queuedMs ?? 0,
      machine: run.machineMs ?? 0,
      gateway: run.gatewayMs ?? 0,
      rest: Math.max((run.totalMs ?? parts) - parts, 0),
    };
  });
  const bars = [
    { key: "queued", color: "var(--color-chart-4, #64748b)" },
    { key: "machine", color: "var(--color-chart-1, #2563eb)" },
    { key: "gateway", color: "var(--color-chart-2, #f59e0b)" },
    { key: "rest", color: "var(--color-chart-5, #10b981)" },
  ];
  return (
    <div className="h-56 w-full" data-testid="provision-chart">
      <ResponsiveContainer width="100%" height="100%">
        <BarChart data={rows} margin={{ top: 8, right: 8, bottom: 0, left: 8 }}>
          <CartesianGrid strokeDasharray="3 3" vertical={false} className="stroke-border" />
          <XAxis dataKey="name" tickLine={false} axisLine={false} fontSize={11} interval="preserveStartEnd" />
          <YAxis tickFormatter={(value: number) => formatMs(value)} fontSize={11} width={64} />
          <Tooltip
            formatter={(value) => formatMs(Number(value))}
            contentStyle={{ fontSize: 12, borderRadius: 6 }}
          />
          <Legend wrapperStyle={{ fontSize: 12 }} />
          {bars.map((bar) => (
            <Bar
              key={bar.key}
              dataKey={bar.key}
              stackId="provision"
              fill={bar.color}
              isAnimationActive={false}
            />
          ))}
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}

/**
 * This workspace's stage timings over the retention window: its latest provisions stage by stage (a chart)
 * and every stage's count, p50, p95 and worst (provisions, attaches, turns).
 */
export function WorkspaceTimings({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const trpc = useTRPC();
  const timings = useQuery(trpc.operations.workspaceTimings.queryOptions({ tenantSlug, workspaceId }));
  if (timings.error) return <Alert>{timings.error.message}</Alert>;
  if (!timings.data) return <Skeleton className="h-56 w-full" />;
  const { stages, provisions } = timings.data;
  if (stages.length === 0) {
    return (
      <Card>
        <EmptyState
          icon={Gauge}
          title="No stage timings yet"
          description="They appear once this workspace is provisioned or attached, or a turn runs in it."
        />
      </Card>
    );
  }
  return (
    <div className="grid gap-5">
      {provisions.length > 0 && (
        <Card aria-label="Provisions">
          <CardHeader>
            <div>
              <CardTitle>Provisions</CardTitle>
              <CardDescription>
                Its latest {provisions.length} provisions, stage by stage (UTC): queued, machine created,
                gateway ready, then the rest up to ready.
              </CardDescription>
            </div>
          </CardHeader>
          <CardContent>
            <ProvisionChart provisions={provisions} />
          </CardContent>
        </Card>
      )}
      <Card aria-label="Stage timings">
        <CardHeader>
          <CardTitle>Stage timings</CardTitle>
        </CardHeader>
        <Table aria-label="Stage timings">
          <TableHeader>
            <TableRow>
              <TableHead>Kind</TableHead>
              <TableHead>Path</TableHead>
              <TableHead>Stage</TableHead>
              <TableHead>Samples</TableHead>
              <TableHead>p50</TableHead>
              <TableHead>p95</TableHead>
              <TableHead>Worst</TableHead>
              <TableHead>Latest</TableHead>
            </TableRow>
          </TableHeader>
          <TableBody>
            {stages.map((row) => (
              <TableRow key={`${row.kind}/${row.path}/${row.stage}`} data-testid="stage-row">
                <TableCell>{row.kind}</TableCell>
                <TableCell>{row.path}</TableCell>
                <TableCell>{row.stage.replace("_", " ")}</TableCell>
                <TableCell className="tabular-nums">{row.count}</TableCell>
                <TableCell className="tabular-nums">{formatMs(row.p50)}</TableCell>
                <TableCell className="tabular-nums">{formatMs(row.p95)}</TableCell>
                <TableCell className="tabular-nums">{formatMs(row.maxMs)}</TableCell>
                <TableCell>
                  <RelativeTime value={row.lastAt} />
                </TableCell>
              </TableRow>
            ))}
          </TableBody>
        </Table>
      </Card>
    </div>
  );
}
