"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Input } from "@/app/_components/ui/input";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import type { QuotaUsageItem } from "@/server/modules/quota/quota.types";

const MIB = 1024 * 1024;
/** The limits an operator overrides, in the order the form shows them; byte limits are edited in MiB. */
const EDITABLE = [
  { limit: "liveWorkspaces", unit: "" },
  { limit: "totalWorkspaces", unit: "" },
  { limit: "concurrentTurns", unit: "" },
  { limit: "provisionsPerMinute", unit: "" },
  { limit: "warmClaimsPerMinute", unit: "" },
  { limit: "mcpServersPerScope", unit: "" },
  { limit: "workspaceCpus", unit: "CPUs" },
  { limit: "workspaceMemoryBytes", unit: "MiB" },
  { limit: "workspaceDiskBytes", unit: "MiB" },
  { limit: "skillStorageBytes", unit: "MiB" },
] as const;
type EditableLimit = (typeof EDITABLE)[number]["limit"];

const shown = (item: QuotaUsageItem, unit: string) =>
  unit === "MiB" ? Math.round((item.value / MIB) * 100) / 100 : item.value;

/**
 * A tenant's quotas for operators: each limit's use and effective value, and the tenant's own override
 * (blank: the installation's default). Saving replaces every override at once and is in the operator audit;
 * 0 for CPU, memory or disk means the backend's own setting, and 0 warm pool machines per minute no limit.
 */
export function TenantQuotas({ tenantId }: { tenantId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const quota = useQuery(trpc.operator.tenants.quota.queryOptions({ tenantId }));
  const [error, setError] = useState<string | null>(null);
  const save = useMutation(
    trpc.operator.tenants.setQuotaOverrides.mutationOptions({
      onSuccess: async () => {
        setError(null);
        toast.success("Quotas saved.");
        await queryClient.invalidateQueries({ queryKey: trpc.operator.pathKey() });
      },
      onError: (failure) => setError(failure.message),
    }),
  );

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const overrides: Partial<Record<EditableLimit, number | null>> = {};
    for (const { limit, unit } of EDITABLE) {
      const entry = form.get(limit);
      const raw = typeof entry === "string" ? entry.trim() : "";
      if (raw === "") {
        overrides[limit] = null;
        continue;
      }
      const value = Number(raw);
      if (!Number.isFinite(value) || value < 0) {
        setError(`${limit}: a number of 0 or more, or blank for the default`);
        return;
      }
      overrides[limit] =
        unit === "MiB" ? Math.round(value * MIB) : limit === "workspaceCpus" ? value : Math.round(value);
    }
    save.mutate({ tenantId, overrides });
  }

  const byLimit = new Map((quota.data?.limits ?? []).map((item) => [item.limit, item]));
  return (
    <Card data-testid="tenant-quotas">
      <CardHeader>
        <CardTitle>Quotas</CardTitle>
        <CardDescription>
          Blank uses the installation&apos;s default. A request past a limit is refused, naming it; a first
          use past the warm pool limit is created cold instead.
        </CardDescription>
      </CardHeader>
      <CardContent>
        {quota.error ? (
          <Alert>{quota.error.message}</Alert>
        ) : !quota.data ? (
          <Skeleton className="h-56 w-full" />
        ) : (
          <form className="grid gap-3" aria-label="Tenant quotas" onSubmit={submit}>
            <div className="grid grid-cols-[1fr_auto_8rem] items-center gap-x-3 gap-y-2 text-sm">
              {EDITABLE.map(({ limit, unit }) => {
                const item = byLimit.get(limit);
                if (!item) return null;
                const id = `quota-${limit}`;
                return (
                  <div key={limit} className="contents" data-testid={id}>
                    <label htmlFor={id} className="text-muted-foreground">
                      {item.label}
                      {unit && <span className="text-xs"> ({unit})</span>}
                    </label>
                    <span className="text-right text-xs tabular-nums">
                      {item.used !== null ? `${item.used} used` : ""}
                    </span>
                    <Input
                      id={id}
                      name={limit}
                      inputMode="decimal"
                      aria-label={item.label}
                      defaultValue={item.overridden ? String(shown(item, unit)) : ""}
                      placeholder={
                        item.value === 0 && unit !== ""
                          ? "default: the backend's"
                          : item.value === 0 && limit === "warmClaimsPerMinute"
                            ? "default: no limit"
                            : `default ${shown(item, unit)}`
                      }
                    />
                  </div>
                );
              })}
            </div>
            {error && <Alert data-testid="tenant-quotas-error">{error}</Alert>}
            <Button type="submit" size="sm" className="justify-self-end" disabled={save.isPending}>
              {save.isPending ? "Saving…" : "Save quotas"}
            </Button>
          </form>
        )}
      </CardContent>
    </Card>
  );
}
