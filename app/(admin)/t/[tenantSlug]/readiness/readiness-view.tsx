"use client";

import { useQuery } from "@tanstack/react-query";
import { Gauge } from "lucide-react";
import Link from "next/link";
import { useMemo, useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Field } from "@/app/_components/ui/field";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useTRPC } from "@/app/_trpc/client";
import { formatMs, StageChart, type StageRow } from "./stage-chart";

const RANGES = [
  { value: "1h", label: "Last hour", ms: 3_600_000 },
  { value: "24h", label: "Last 24 hours", ms: 86_400_000 },
  { value: "7d", label: "Last 7 days", ms: 7 * 86_400_000 },
  { value: "30d", label: "Last 30 days", ms: 30 * 86_400_000 },
] as const;

export function ReadinessView({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const [rangeKey, setRangeKey] = useState<(typeof RANGES)[number]["value"]>("24h");
  // The range is fixed when chosen (not on every render), so the query key stays stable.
  const range = useMemo(() => {
    const to = new Date();
    const span = RANGES.find((r) => r.value === rangeKey)!.ms;
    return { from: new Date(to.getTime() - span), to };
  }, [rangeKey]);
  const readiness = useQuery(trpc.operations.readiness.queryOptions({ tenantSlug, ...range, slowest: 10 }));

  const groups = useMemo(() => {
    const byGroup = new Map<string, StageRow[]>();
    for (const row of readiness.data?.stages ?? []) {
      const key = `${row.kind} · ${row.backend} · ${row.path}`;
      byGroup.set(key, [...(byGroup.get(key) ?? []), row]);
    }
    return [...byGroup.entries()];
  }, [readiness.data]);

  return (
    <div className="flex flex-col gap-6">
      <Field label="Range" className="w-48">
        <Select value={rangeKey} onChange={(event) => setRangeKey(event.target.value as typeof rangeKey)}>
          {RANGES.map((r) => (
            <option key={r.value} value={r.value}>
              {r.label}
            </option>
          ))}
        </Select>
      </Field>
      {readiness.error && <Alert>{readiness.error.message}</Alert>}
      {!readiness.data && !readiness.error && <Skeleton className="h-64 w-full" />}
      {readiness.data && groups.length === 0 && (
        <EmptyState
          icon={Gauge}
          title="No measurements in this range"
          description="Stage timings appear once workspaces are provisioned or attached and turns run."
        />
      )}
      {groups.map(([group, rows]) => (
        <Card key={group} aria-label={`Stages of ${group}`} data-testid="stage-group">
          <CardHeader>
            <div>
              <CardTitle>{group}</CardTitle>
              <CardDescription>
                p50, p95 and p99 per stage; {rows.reduce((n, r) => Math.max(n, r.count), 0)} samples at most
                per stage.
              </CardDescription>
            </div>
          </CardHeader>
          <CardContent>
            <StageChart rows={rows} />
          </CardContent>
        </Card>
      ))}
      {readiness.data && readiness.data.slowest.length > 0 && (
        <Card aria-labelledby="slowest-heading">
          <CardHeader>
            <CardTitle id="slowest-heading">Slowest provisions</CardTitle>
          </CardHeader>
          <Table aria-label="Slowest provisions">
            <TableHeader>
              <TableRow>
                <TableHead>Workspace</TableHead>
                <TableHead>Backend</TableHead>
                <TableHead>Path</TableHead>
                <TableHead>Took</TableHead>
                <TableHead>Outcome</TableHead>
                <TableHead>When</TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {readiness.data.slowest.map((row, index) => (
                <TableRow key={`${row.workspaceId}-${index}`} data-testid="slow-provision">
                  <TableCell>
                    {row.workspaceId ? (
                      <Link
                        className="font-mono text-xs underline-offset-2 hover:underline"
                        href={`/t/${encodeURIComponent(tenantSlug)}/workspaces/${encodeURIComponent(row.workspaceId)}`}
                      >
                        {row.workspaceId}
                      </Link>
                    ) : (
                      "—"
                    )}
                  </TableCell>
                  <TableCell>{row.backend}</TableCell>
                  <TableCell>{row.path}</TableCell>
                  <TableCell>{formatMs(row.durationMs)}</TableCell>
                  <TableCell>
                    <StateBadge state={row.ok ? "ok" : "failed"} />
                  </TableCell>
                  <TableCell>
                    <RelativeTime value={row.at} />
                  </TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        </Card>
      )}
    </div>
  );
}
