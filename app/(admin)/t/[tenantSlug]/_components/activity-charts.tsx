"use client";

import { useQuery } from "@tanstack/react-query";
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { useTRPC } from "@/app/_trpc/client";
import { ChartCards, dayLabel, hourLabel, type ChartCard } from "./chart-cards";

type Bucket = { at: Date; ok: number; failed: number };

function ActivityChart({
  data,
  label,
  testId,
}: {
  data: Bucket[];
  label: (at: Date) => string;
  testId: string;
}) {
  const rows = data.map((bucket) => ({ name: label(bucket.at), ok: bucket.ok, failed: bucket.failed }));
  return (
    <div className="h-48 w-full" data-testid={testId}>
      <ResponsiveContainer width="100%" height="100%">
        <BarChart data={rows} margin={{ top: 8, right: 8, bottom: 0, left: 0 }}>
          <CartesianGrid strokeDasharray="3 3" vertical={false} className="stroke-border" />
          <XAxis dataKey="name" tickLine={false} axisLine={false} fontSize={11} interval="preserveStartEnd" />
          <YAxis allowDecimals={false} fontSize={11} width={32} />
          <Tooltip contentStyle={{ fontSize: 12, borderRadius: 6 }} />
          <Bar
            dataKey="ok"
            stackId="outcome"
            fill="var(--color-chart-1, #2563eb)"
            isAnimationActive={false}
          />
          <Bar
            dataKey="failed"
            stackId="outcome"
            fill="var(--color-chart-3, #dc2626)"
            isAnimationActive={false}
          />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}

/** The Overview's pictures: workspace starts per hour and turns per day (UTC), failed ones stacked in red. */
export function ActivityCharts({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const activity = useQuery(trpc.operations.activity.queryOptions({ tenantSlug }));
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const cards: ChartCard[] = [
    {
      title: "Workspace starts",
      description: "Provisions per hour, last 24 hours (UTC).",
      href: `${base}/readiness`,
      link: "Readiness",
      chart: activity.data ? (
        <ActivityChart data={activity.data.startsPerHour} label={hourLabel} testId="starts-chart" />
      ) : null,
    },
    {
      title: "Turns",
      description: "Chat turns per day, last 14 days (UTC).",
      href: `${base}/sessions`,
      link: "Sessions",
      chart: activity.data ? (
        <ActivityChart data={activity.data.turnsPerDay} label={dayLabel} testId="turns-chart" />
      ) : null,
    },
  ];
  return <ChartCards cards={cards} className="mt-8" />;
}
