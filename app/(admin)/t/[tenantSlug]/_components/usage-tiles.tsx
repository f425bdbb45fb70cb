"use client";

import { useQuery } from "@tanstack/react-query";
import { Bot } from "lucide-react";
import Link from "next/link";
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Table, TableBody, TableCell, TableHead, TableHeader, TableRow } from "@/app/_components/ui/table";
import { useTRPC } from "@/app/_trpc/client";
import { useTenantRole } from "./tenant-role";

const compact = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });
const dayLabel = (at: Date) => at.toISOString().slice(5, 10);

function TokensChart({ days }: { days: { at: Date; input: number; output: number }[] }) {
  const rows = days.map((day) => ({ name: dayLabel(day.at), input: day.input, output: day.output }));
  return (
    <div className="h-48 w-full" data-testid="tokens-chart">
      <ResponsiveContainer width="100%" height="100%">
        <BarChart data={rows} margin={{ top: 8, right: 8, bottom: 0, left: 0 }}>
          <CartesianGrid strokeDasharray="3 3" vertical={false} className="stroke-border" />
          <XAxis dataKey="name" tickLine={false} axisLine={false} fontSize={11} interval="preserveStartEnd" />
          <YAxis tickFormatter={(value: number) => compact.format(value)} fontSize={11} width={40} />
          <Tooltip contentStyle={{ fontSize: 12, borderRadius: 6 }} />
          <Legend wrapperStyle={{ fontSize: 12 }} />
          <Bar
            dataKey="input"
            stackId="tokens"
            fill="var(--color-chart-1, #2563eb)"
            isAnimationActive={false}
          />
          <Bar
            dataKey="output"
            stackId="tokens"
            fill="var(--color-chart-2, #f59e0b)"
            isAnimationActive={false}
          />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}

/** The tenant's jobs waiting, running, delayed and failed per queue (admins: the Jobs page is theirs). */
function QueueDepthCard({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const depth = useQuery(
    trpc.operations.queueDepth.queryOptions({ tenantSlug }, { refetchInterval: 10_000 }),
  );
  return (
    <Card aria-label="Queue depth">
      <CardHeader>
        <div>
          <CardTitle>Queue depth</CardTitle>
          <CardDescription>
            This tenant&apos;s background jobs per queue.{" "}
            <Link
              className="underline-offset-2 hover:underline"
              href={`/t/${encodeURIComponent(tenantSlug)}/jobs`}
            >
              Jobs
            </Link>
          </CardDescription>
        </div>
      </CardHeader>
      {depth.data ? (
        <Table aria-label="Queue depth">
          <TableHeader>
            <TableRow>
              <TableHead>Queue</TableHead>
              <TableHead>Waiting</TableHead>
              <TableHead>Active</TableHead>
              <TableHead>Delayed</TableHead>
              <TableHead>Failed</TableHead>
            </TableRow>
          </TableHeader>
          <TableBody>
            {depth.data.map((row) => (
              <TableRow key={row.queue} data-testid="queue-depth-row" data-queue={row.queue}>
                <TableCell>
                  <code className="text-xs">{row.queue}</code>
                </TableCell>
                {([row.waiting, row.active, row.delayed, row.failed] as const).map((count, index) => (
                  <TableCell key={index} className="tabular-nums">
                    {count}
                    {row.capped ? "+" : ""}
                  </TableCell>
                ))}
              </TableRow>
            ))}
          </TableBody>
        </Table>
      ) : (
        <CardContent>
          <Skeleton className="h-32 w-full" />
        </CardContent>
      )}
    </Card>
  );
}

/**
 * The Overview's usage tiles: tokens per day and the top agents (every member), and the queue depth
 * (admins). Each links to the list it summarises.
 */
export function UsageTiles({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const usage = useQuery(trpc.operations.usage.queryOptions({ tenantSlug }));
  const { can } = useTenantRole(tenantSlug);
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const tokens14d = usage.data?.tokensPerDay.reduce((sum, day) => sum + day.input + day.output, 0) ?? 0;
  return (
    <div className="mt-3 grid gap-3 md:grid-cols-2">
      <Card aria-label="Tokens">
        <CardHeader>
          <div>
            <CardTitle>Tokens</CardTitle>
            <CardDescription>
              Input and output tokens per day, last 14 days (UTC)
              {usage.data ? `: ${compact.format(tokens14d)} in all.` : "."}{" "}
              <Link className="underline-offset-2 hover:underline" href={`${base}/sessions`}>
                Sessions
              </Link>
            </CardDescription>
          </div>
        </CardHeader>
        <CardContent>
          {usage.data ? <TokensChart days={usage.data.tokensPerDay} /> : <Skeleton className="h-48 w-full" />}
        </CardContent>
      </Card>
      <Card aria-label="Top agents">
        <CardHeader>
          <div>
            <CardTitle>Top agents</CardTitle>
            <CardDescription>
              By tokens, then turns, over the last 7 days.{" "}
              <Link className="underline-offset-2 hover:underline" href={`${base}/agents`}>
                Agents
              </Link>
            </CardDescription>
          </div>
        </CardHeader>
        {!usage.data && (
          <CardContent>
            <Skeleton className="h-32 w-full" />
          </CardContent>
        )}
        {usage.data && usage.data.topAgents.length === 0 && (
          <EmptyState icon={Bot} title="No agent ran a turn this week" />
        )}
        {usage.data && usage.data.topAgents.length > 0 && (
          <Table aria-label="Top agents">
            <TableHeader>
              <TableRow>
                <TableHead>Agent</TableHead>
                <TableHead>Turns</TableHead>
                <TableHead>Tokens</TableHead>
              </TableRow>
            </TableHeader>
            <TableBody>
              {usage.data.topAgents.map((agent) => (
                <TableRow key={agent.agentId} data-testid="top-agent">
                  <TableCell>
                    {agent.name ? (
                      <Link
                        className="underline-offset-2 hover:underline"
                        href={`${base}/agents/${encodeURIComponent(agent.agentId)}`}
                      >
                        {agent.name}
                      </Link>
                    ) : (
                      <span className="text-muted-foreground">deleted agent</span>
                    )}
                  </TableCell>
                  <TableCell className="tabular-nums">{agent.turns}</TableCell>
                  <TableCell className="tabular-nums">{compact.format(agent.tokens)}</TableCell>
                </TableRow>
              ))}
            </TableBody>
          </Table>
        )}
      </Card>
      {can("operations:read", false) && <QueueDepthCard tenantSlug={tenantSlug} />}
    </div>
  );
}
