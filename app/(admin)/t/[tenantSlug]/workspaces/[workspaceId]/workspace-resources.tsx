"use client";

import { useQuery } from "@tanstack/react-query";
import { Cpu } from "lucide-react";
import { useState } from "react";
import { CartesianGrid, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Alert } from "@/app/_components/ui/alert";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Field } from "@/app/_components/ui/field";
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";

const RANGES = [
  { value: "1h", label: "Last hour" },
  { value: "6h", label: "Last 6 hours" },
  { value: "24h", label: "Last 24 hours" },
] as const;
type Range = (typeof RANGES)[number]["value"];

type Point = { at: Date; value: number | null };

const timeLabel = (ms: number) => new Date(ms).toISOString().slice(11, 16);

function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 && unit > 0 ? 1 : 0)} ${units[unit]}`;
}

function ResourceChart({
  title,
  points,
  format,
  testId,
}: {
  title: string;
  points: Point[];
  format: (value: number) => string;
  testId: string;
}) {
  const rows = points.map((point) => ({ at: point.at.getTime(), value: point.value }));
  const known = rows.filter((row) => row.value !== null);
  return (
    <Card aria-label={title}>
      <CardHeader>
        <div>
          <CardTitle>{title}</CardTitle>
          <CardDescription>
            {known.length > 0 ? `Now ${format(known.at(-1)!.value!)}` : "Not reported by this backend."}
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent>
        <div className="h-40 w-full" data-testid={testId}>
          <ResponsiveContainer width="100%" height="100%">
            <LineChart data={rows} margin={{ top: 8, right: 8, bottom: 0, left: 8 }}>
              <CartesianGrid strokeDasharray="3 3" vertical={false} className="stroke-border" />
              <XAxis
                dataKey="at"
                type="number"
                scale="time"
                domain={["dataMin", "dataMax"]}
                tickFormatter={timeLabel}
                tickLine={false}
                axisLine={false}
                fontSize={11}
              />
              <YAxis tickFormatter={(value: number) => format(value)} fontSize={11} width={64} />
              <Tooltip
                labelFormatter={(value) => new Date(Number(value)).toISOString().slice(11, 19)}
                formatter={(value) => format(Number(value))}
                contentStyle={{ fontSize: 12, borderRadius: 6 }}
              />
              <Line
                type="monotone"
                dataKey="value"
                name={title}
                stroke="var(--color-chart-1, #2563eb)"
                dot={rows.length < 3}
                isAnimationActive={false}
                connectNulls={false}
              />
            </LineChart>
          </ResponsiveContainer>
        </div>
      </CardContent>
    </Card>
  );
}

/**
 * The workspace's CPU, memory, disk and processes over a range (UTC), sampled from its backend every 15 s
 * while it is ready. A backend that reports none (the `supported` flag) says so instead of drawing zeros.
 */
export function WorkspaceResources({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  const trpc = useTRPC();
  const [range, setRange] = useState<Range>("1h");
  const resources = useQuery(
    trpc.operations.workspaceResources.queryOptions(
      { tenantSlug, workspaceId, range },
      { refetchInterval: 15_000 },
    ),
  );
  if (resources.error) return <Alert>{resources.error.message}</Alert>;
  if (!resources.data) return <Skeleton className="h-40 w-full" />;
  const { supported, points } = resources.data;
  if (!supported) {
    return (
      <Card data-testid="resources-unsupported">
        <EmptyState
          icon={Cpu}
          title="No resource figures"
          description="This workspace's backend does not report CPU, memory or disk use."
        />
      </Card>
    );
  }
  const series = (pick: (point: (typeof points)[number]) => number | null): Point[] =>
    points.map((point) => ({ at: point.at, value: pick(point) }));
  return (
    <div className="grid gap-3" aria-label="Resources">
      <Field label="Resources over" className="w-48">
        <Select value={range} onChange={(event) => setRange(event.target.value as Range)}>
          {RANGES.map((option) => (
            <option key={option.value} value={option.value}>
              {option.label}
            </option>
          ))}
        </Select>
      </Field>
      {points.length === 0 ? (
        <Card>
          <EmptyState
            icon={Cpu}
            title="No samples in this range"
            description="They are taken every 15 seconds while the workspace is ready."
          />
        </Card>
      ) : (
        <div className="grid gap-3 md:grid-cols-2">
          <ResourceChart
            title="CPU"
            points={series((p) => p.cpuPercent)}
            format={(value) => `${value.toFixed(value < 10 ? 1 : 0)} %`}
            testId="cpu-chart"
          />
          <ResourceChart
            title="Memory"
            points={series((p) => p.memoryBytes)}
            format={formatBytes}
            testId="memory-chart"
          />
          <ResourceChart
            title="Disk"
            points={series((p) => p.diskBytes)}
            format={formatBytes}
            testId="disk-chart"
          />
          <ResourceChart
            title="Processes"
            points={series((p) => p.processes)}
            format={(value) => String(Math.round(value))}
            testId="processes-chart"
          />
        </div>
      )}
    </div>
  );
}
