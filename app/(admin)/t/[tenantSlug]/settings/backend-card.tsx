"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Field } from "@/app/_components/ui/field";
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";

/**
 * The backends this installation runs (the operator's BERTH_WORKSPACE_BACKENDS), what each confines, and
 * the tenant's default among them: new workspaces of agents without a backend of their own go there.
 * Owners change it; existing workspaces stay on the backend they were created on.
 */
export function BackendCard({ tenantSlug, canManage }: { tenantSlug: string; canManage: boolean }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const backends = useQuery(trpc.workspace.backends.queryOptions({ tenantSlug }));
  const save = useMutation(
    trpc.workspace.setDefaultBackend.mutationOptions({
      onSuccess: (next) => {
        queryClient.setQueryData(trpc.workspace.backends.queryKey({ tenantSlug }), next);
        toast.success("Default backend saved.");
      },
      onError: (error) => toast.error(error.message),
    }),
  );

  return (
    <Card aria-labelledby="backend-heading" data-testid="settings-backend">
      <CardHeader>
        <div>
          <CardTitle id="backend-heading">Backend</CardTitle>
          <CardDescription>
            Where new workspaces run. The operator decides which backends exist; existing workspaces stay
            where they are.
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent className="grid gap-3 text-sm">
        {backends.error ? (
          <Alert>{backends.error.message}</Alert>
        ) : !backends.data ? (
          <Skeleton className="h-16 w-full" />
        ) : (
          <>
            <ul className="grid gap-2" aria-label="Backends of this installation">
              {backends.data.available.map((option) => (
                <li key={option.kind} className="grid gap-1">
                  <div className="flex flex-wrap items-center gap-2">
                    <span className="font-mono">{option.driver}</span>
                    <Badge tone={option.isolated ? "success" : "warning"}>
                      {option.isolated ? "isolated" : "not isolated: trusted agents only"}
                    </Badge>
                    {option.kind === backends.data.installationDefault && <Badge>installation default</Badge>}
                  </div>
                  <p className="text-muted-foreground text-xs">
                    {option.summary}
                    {option.sandbox ? ` (sandbox: ${option.sandbox})` : ""}
                    {option.pauseKeepsMemory ? "; a stop keeps memory too" : ""}
                  </p>
                </li>
              ))}
            </ul>
            <Field label="Tenant default" hint="For agents whose backend is “Tenant default”.">
              <Select
                name="defaultBackend"
                aria-label="Tenant default backend"
                disabled={!canManage || save.isPending}
                value={backends.data.tenantDefault ?? ""}
                onChange={(event) => {
                  const value = event.currentTarget.value;
                  const chosen = backends.data.available.find((option) => option.kind === value);
                  save.mutate({ tenantSlug, defaultBackend: chosen?.kind ?? null });
                }}
              >
                <option value="">Installation default ({backends.data.installationDefault})</option>
                {backends.data.available.map((option) => (
                  <option key={option.kind} value={option.kind}>
                    {option.kind}
                  </option>
                ))}
              </Select>
            </Field>
          </>
        )}
      </CardContent>
    </Card>
  );
}
