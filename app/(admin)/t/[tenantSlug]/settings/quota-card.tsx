"use client";

import { useQuery } from "@tanstack/react-query";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";

const BYTE_LIMITS = new Set(["workspaceMemoryBytes", "workspaceDiskBytes", "skillStorageBytes"]);
const RESOURCE_LIMITS = new Set(["workspaceCpus", "workspaceMemoryBytes", "workspaceDiskBytes"]);
/** Limits whose 0 is no limit at all. */
const UNCAPPED_AT_ZERO = new Set(["skillStorageBytes", "warmClaimsPerMinute"]);

function bytes(value: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${Math.round(value * 10) / 10} ${units[unit]}`;
}

function valueText(limit: string, value: number): string {
  if (value === 0 && RESOURCE_LIMITS.has(limit)) return "backend's setting";
  if (value === 0 && UNCAPPED_AT_ZERO.has(limit)) return "no limit";
  return BYTE_LIMITS.has(limit) ? bytes(value) : String(value);
}

const round = (value: number) => Math.round(value * 100) / 100;

const reached = (item: { limit: string; value: number; used: number | null }) =>
  item.used !== null && item.used >= item.value && !(item.value === 0 && UNCAPPED_AT_ZERO.has(item.limit));

/**
 * The tenant's quotas against its use of each (`quota.usage`, admins), and this month's budget and
 * metered usage. Values are the installation's defaults unless marked as the tenant's own.
 */
export function QuotaCard({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const usage = useQuery(trpc.quota.usage.queryOptions({ tenantSlug }));
  return (
    <Card aria-labelledby="quota-heading" data-testid="settings-quotas">
      <CardHeader>
        <div>
          <CardTitle id="quota-heading">Quotas and usage</CardTitle>
          <CardDescription>
            What this tenant may use, and how much it uses now. A request past a limit is refused, naming it;
            a first use past the warm pool limit is created cold instead.
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent className="grid gap-4 text-sm">
        {usage.error ? (
          <Alert>{usage.error.message}</Alert>
        ) : !usage.data ? (
          <Skeleton className="h-40 w-full" />
        ) : (
          <>
            <dl className="grid grid-cols-[1fr_auto] gap-x-4 gap-y-1.5">
              {usage.data.limits.map((item) => (
                <div key={item.limit} className="contents" data-testid={`quota-${item.limit}`}>
                  <dt className="text-muted-foreground">
                    {item.label} {item.overridden && <Badge>tenant</Badge>}
                  </dt>
                  <dd className="text-right tabular-nums">
                    {item.used !== null && (
                      <span className={reached(item) ? "text-destructive font-medium" : ""}>
                        {item.used} of{" "}
                      </span>
                    )}
                    {valueText(item.limit, item.value)}
                  </dd>
                </div>
              ))}
            </dl>
            <div className="grid gap-1" data-testid="quota-budget">
              <div className="font-medium">Budget ({usage.data.budget.month})</div>
              {usage.data.budget.monthlyBudgetUnits === null ? (
                <p className="text-muted-foreground">No monthly budget.</p>
              ) : (
                <p>
                  {round(usage.data.budget.spentUnits)} of {usage.data.budget.monthlyBudgetUnits} units
                  {usage.data.budget.hardStop ? "; new turns and provisions stop when it is used up" : ""}
                  {usage.data.budget.stopWorkspaces ? ", and running workspaces are stopped" : ""}
                </p>
              )}
              <p className="text-muted-foreground text-xs">
                This month: {round((usage.data.usage.workspace_seconds ?? 0) / 3600)} workspace-hours,{" "}
                {usage.data.usage.provision ?? 0} provisions, {usage.data.usage.turn ?? 0} turns,{" "}
                {usage.data.usage.input_tokens ?? 0} / {usage.data.usage.output_tokens ?? 0} tokens in/out,{" "}
                {usage.data.usage.tool_call ?? 0} tool calls.
              </p>
            </div>
          </>
        )}
      </CardContent>
    </Card>
  );
}
