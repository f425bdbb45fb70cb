"use client";

import { useQuery } from "@tanstack/react-query";
import {
  Area,
  AreaChart,
  Bar,
  BarChart,
  CartesianGrid,
  Legend,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from "recharts";
import { useTRPC } from "@/app/_trpc/client";
import { ChartCards, dayLabel, hourLabel, type ChartCard } from "./chart-cards";

/** Stacking order and colours of the states (the service folds PENDING into provisioning, etc.). */
const STATES = [
  { key: "ready", color: "var(--color-chart-1, #2563eb)" },
  { key: "provisioning", color: "var(--color-chart-2, #f59e0b)" },
  { key: "stopped", color: "var(--color-chart-4, #64748b)" },
  { key: "failed", color: "var(--color-chart-3, #dc2626)" },
  { key: "purged", color: "var(--color-chart-5, #a855f7)" },
] as const;

type StateBucket = { at: Date } & Record<(typeof STATES)[number]["key"], number>;

function StatesChart({ hours }: { hours: StateBucket[] }) {
  const rows = hours.map(({ at, ...counts }) => ({ name: hourLabel(at), ...counts }));
  return (
    <div className="h-48 w-full" data-testid="workspace-states-chart">
      <ResponsiveContainer width="100%" height="100%">
        <AreaChart data={rows} margin={{ top: 8, right: 8, bottom: 0, left: 0 }}>
          <CartesianGrid strokeDasharray="3 3" vertical={false} className="stroke-border" />
          <XAxis dataKey="name" tickLine={false} axisLine={false} fontSize={11} interval="preserveStartEnd" />
          <YAxis allowDecimals={false} fontSize={11} width={32} />
          <Tooltip contentStyle={{ fontSize: 12, borderRadius: 6 }} />
          <Legend wrapperStyle={{ fontSize: 12 }} />
          {STATES.map((state) => (
            <Area
              key={state.key}
              type="stepAfter"
              dataKey={state.key}
              stackId="states"
              stroke={state.color}
              fill={state.color}
              fillOpacity={0.35}
              isAnimationActive={false}
            />
          ))}
        </AreaChart>
      </ResponsiveContainer>
    </div>
  );
}

function FailedTurnsChart({ days }: { days: { at: Date; failed: number; interrupted: number }[] }) {
  const rows = days.map((day) => ({
    name: dayLabel(day.at),
    failed: day.failed,
    interrupted: day.interrupted,
  }));
  return (
    <div className="h-48 w-full" data-testid="failed-turns-chart">
      <ResponsiveContainer width="100%" height="100%">
        <BarChart data={rows} margin={{ top: 8, right: 8, bottom: 0, left: 0 }}>
          <CartesianGrid strokeDasharray="3 3" vertical={false} className="stroke-border" />
          <XAxis dataKey="name" tickLine={false} axisLine={false} fontSize={11} interval="preserveStartEnd" />
          <YAxis allowDecimals={false} fontSize={11} width={32} />
          <Tooltip contentStyle={{ fontSize: 12, borderRadius: 6 }} />
          <Legend wrapperStyle={{ fontSize: 12 }} />
          <Bar
            dataKey="failed"
            stackId="turns"
            fill="var(--color-chart-3, #dc2626)"
            isAnimationActive={false}
          />
          <Bar
            dataKey="interrupted"
            stackId="turns"
            fill="var(--color-chart-2, #f59e0b)"
            isAnimationActive={false}
          />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}

/** The Overview's trends: workspaces by state per hour (24 h) and failed turns per day (14 days), UTC. */
export function TrendCharts({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const trends = useQuery(trpc.operations.trends.queryOptions({ tenantSlug }));
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const cards: ChartCard[] = [
    {
      title: "Workspaces by state",
      description: "At the end of each hour, last 24 hours (UTC).",
      href: `${base}/workspaces`,
      link: "Workspaces",
      chart: trends.data ? <StatesChart hours={trends.data.workspaceStates} /> : null,
    },
    {
      title: "Failed turns",
      description: "Failed and interrupted chat turns per day, last 14 days (UTC).",
      href: `${base}/sessions`,
      link: "Sessions",
      chart: trends.data ? <FailedTurnsChart days={trends.data.failedTurns} /> : null,
    },
  ];
  return <ChartCards cards={cards} className="mt-3" />;
}
