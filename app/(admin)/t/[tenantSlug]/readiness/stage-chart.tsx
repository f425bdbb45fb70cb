"use client";

import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";

export type StageRow = {
  kind: string;
  backend: string;
  path: string;
  stage: string;
  count: number;
  p50: number;
  p95: number;
  p99: number;
};

/** Stage order along a provision, then a turn's parts: the chart reads left to right like the timeline. */
const STAGE_ORDER = [
  "queued",
  "machine",
  "gateway",
  "total",
  "attach",
  "first_answer",
  "queue_wait",
  "model",
  "tool",
];

export function formatMs(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** p50/p95/p99 bars per stage of one backend and path (one chart per group). */
export function StageChart({ rows }: { rows: StageRow[] }) {
  const data = [...rows]
    .sort((a, b) => STAGE_ORDER.indexOf(a.stage) - STAGE_ORDER.indexOf(b.stage))
    .map((row) => ({
      name: row.stage.replace("_", " "),
      p50: row.p50,
      p95: row.p95,
      p99: row.p99,
      n: row.count,
    }));
  return (
    <div className="h-64 w-full" data-testid="stage-chart">
      <ResponsiveContainer width="100%" height="100%">
        <BarChart data={data} margin={{ top: 8, right: 8, bottom: 0, left: 8 }}>
          <CartesianGrid strokeDasharray="3 3" className="stroke-border" vertical={false} />
          <XAxis dataKey="name" tickLine={false} axisLine={false} fontSize={12} />
          <YAxis tickFormatter={(value: number) => formatMs(value)} fontSize={12} width={64} />
          <Tooltip
            formatter={(value) => formatMs(Number(value))}
            contentStyle={{ fontSize: 12, borderRadius: 6 }}
          />
          <Legend wrapperStyle={{ fontSize: 12 }} />
          <Bar
            dataKey="p50"
            fill="var(--color-chart-1, #2563eb)"
            radius={[3, 3, 0, 0]}
            isAnimationActive={false}
          />
          <Bar
            dataKey="p95"
            fill="var(--color-chart-2, #f59e0b)"
            radius={[3, 3, 0, 0]}
            isAnimationActive={false}
          />
          <Bar
            dataKey="p99"
            fill="var(--color-chart-3, #dc2626)"
            radius={[3, 3, 0, 0]}
            isAnimationActive={false}
          />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}
