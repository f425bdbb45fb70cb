"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import type { TenantPolicyView } from "@/server/modules/tenant/tenant-policy";
import {
  ISOLATION_HELP,
  ISOLATION_POLICIES,
  isolationLabel,
  parseIsolation,
  ServerErrors,
} from "../agents/agent-ui";
import { useTenantRole } from "../_components/tenant-role";
import { BackendCard } from "./backend-card";
import { BackendSettingsCards } from "./backend-settings-cards";
import { CheckpointRetentionCard } from "./checkpoint-retention-card";
import { EgressCard, SecretsCard } from "./egress-cards";
import { QuotaCard } from "./quota-card";
import { resetErrorOnEdit } from "@/app/_components/ui/use-submit-once";

const MINUTE_MS = 60_000;
const STDIO_ROLES = ["owner", "admin", "member"] as const;

/** Minutes as the form shows them: whole when they are, else to a tenth. */
const minutes = (ms: number) => Math.round((ms / MINUTE_MS) * 10) / 10;

/** The changes the form asks for: only fields that differ from the stored policy. */
function policyPatch(policy: TenantPolicyView, form: FormData) {
  const patch: {
    defaultIsolationPolicy?: ReturnType<typeof parseIsolation>;
    workspaceIdleTtlMs?: number | null;
    stdioMcpMinRole?: (typeof STDIO_ROLES)[number];
  } = {};
  const isolation = parseIsolation(form.get("defaultIsolationPolicy"));
  if (isolation !== policy.defaultIsolationPolicy) patch.defaultIsolationPolicy = isolation;
  const ttlText = formString(form, "idleTtlMinutes").trim();
  // Empty: the installation's TTL (null). The server checks the bounds and says which was crossed.
  const ttl = ttlText === "" ? null : Math.round(Number(ttlText) * MINUTE_MS);
  if (ttl !== policy.workspaceIdleTtlMs) patch.workspaceIdleTtlMs = ttl;
  const role = STDIO_ROLES.find((candidate) => candidate === form.get("stdioMcpMinRole"));
  if (role && role !== policy.stdioMcpMinRole) patch.stdioMcpMinRole = role;
  return patch;
}

/**
 * The tenant's defaults, one policy object (`tenant.policy`): the isolation policy of agents that name none,
 * how long its workspaces may sit idle (at most what the installation allows), and who may declare stdio
 * MCP servers. Owners change them; everyone else reads them. The Backend card lists the installation's
 * backends and the tenant's default among them.
 */
export function SettingsView({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { can } = useTenantRole(tenantSlug);
  const canManage = can("tenant:manage", false);
  const policy = useQuery(trpc.tenant.policy.queryOptions({ tenantSlug }));
  const save = useMutation(
    trpc.tenant.setPolicy.mutationOptions({
      onSuccess: async (next) => {
        queryClient.setQueryData(trpc.tenant.policy.queryKey({ tenantSlug }), next);
        toast.success("Settings saved.");
        await queryClient.invalidateQueries({ queryKey: trpc.tenant.policy.queryKey({ tenantSlug }) });
      },
    }),
  );

  if (policy.error) return <Alert>{policy.error.message}</Alert>;
  if (!policy.data) return <Skeleton className="h-64 w-full" />;
  const current = policy.data;
  const maxMinutes = minutes(current.operator.idleTtlMs);

  function onSave(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const patch = policyPatch(current, new FormData(event.currentTarget));
    if (Object.keys(patch).length === 0) return void toast.info("Nothing changed.");
    save.mutate({ tenantSlug, ...patch });
  }

  return (
    <div className="grid gap-6 lg:grid-cols-[1fr_20rem]">
      <Card aria-labelledby="defaults-heading">
        <CardHeader>
          <div>
            <CardTitle id="defaults-heading">Defaults</CardTitle>
            <CardDescription>
              {canManage
                ? "A change applies to sessions created and sweeps run afterwards; existing workspaces keep their isolation."
                : "Only owners change these."}
            </CardDescription>
          </div>
        </CardHeader>
        <CardContent>
          {/* Remounted after a save so the fields start from the stored values again. */}
          <form
            key={JSON.stringify(current)}
            className="grid gap-5"
            onSubmit={onSave}
            onChange={resetErrorOnEdit(save)}
            aria-label="Tenant settings"
          >
            <fieldset disabled={!canManage} className="contents">
              <Field label="Default isolation" hint={`For agents set to "Tenant default". ${ISOLATION_HELP}`}>
                <Select name="defaultIsolationPolicy" defaultValue={current.defaultIsolationPolicy ?? ""}>
                  <option value="">Installation default ({isolationLabel("PER_AGENT")})</option>
                  {ISOLATION_POLICIES.map((value) => (
                    <option key={value} value={value}>
                      {isolationLabel(value)}
                    </option>
                  ))}
                </Select>
              </Field>
              <Field
                label="Idle TTL (minutes)"
                hint={`The sweep stops a workspace idle this long with no turn running (its files stay; the next use starts it again). At most ${maxMinutes} min, the installation's BERTH_WORKSPACE_IDLE_TTL_MS; at least ${minutes(current.operator.minIdleTtlMs)} min. Empty: ${maxMinutes} min.`}
              >
                <Input
                  name="idleTtlMinutes"
                  type="number"
                  min={minutes(current.operator.minIdleTtlMs)}
                  max={maxMinutes}
                  step="any"
                  placeholder={String(maxMinutes)}
                  defaultValue={
                    current.workspaceIdleTtlMs === null ? "" : minutes(current.workspaceIdleTtlMs)
                  }
                />
              </Field>
              <Field
                label="Who may add stdio MCP servers"
                hint="A stdio server is a command run in the workspace. Viewers never can."
              >
                <Select name="stdioMcpMinRole" defaultValue={current.stdioMcpMinRole}>
                  {STDIO_ROLES.map((role) => (
                    <option key={role} value={role}>
                      {role}s and above
                    </option>
                  ))}
                </Select>
              </Field>
              {canManage && (
                <div>
                  <Button type="submit" disabled={save.isPending}>
                    {save.isPending ? "Saving…" : "Save settings"}
                  </Button>
                </div>
              )}
            </fieldset>
          </form>
          <ServerErrors error={save.error} />
        </CardContent>
      </Card>

      <div className="flex flex-col gap-6">
        <Card aria-labelledby="effective-heading">
          <CardHeader>
            <div>
              <CardTitle id="effective-heading">In effect</CardTitle>
              <CardDescription>What applies now, with the operator&apos;s limits.</CardDescription>
            </div>
          </CardHeader>
          <CardContent>
            <dl
              className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-2 text-sm"
              data-testid="settings-effective"
            >
              <dt className="text-muted-foreground">Isolation</dt>
              <dd>{isolationLabel(current.effective.isolationPolicy)}</dd>
              <dt className="text-muted-foreground">Idle TTL</dt>
              <dd>
                {minutes(current.effective.idleTtlMs)} min
                {current.workspaceIdleTtlMs === null && " (installation's)"}
              </dd>
              <dt className="text-muted-foreground">Installation max</dt>
              <dd>{maxMinutes} min</dd>
            </dl>
          </CardContent>
        </Card>

        <CheckpointRetentionCard tenantSlug={tenantSlug} policy={current} canManage={canManage} />
        <BackendCard tenantSlug={tenantSlug} canManage={canManage} />
        <EgressCard tenantSlug={tenantSlug} canManage={canManage} />
        {canManage && <SecretsCard tenantSlug={tenantSlug} />}
        {can("workspace:manage", false) && <BackendSettingsCards tenantSlug={tenantSlug} />}
        {can("workspace:manage", false) && <QuotaCard tenantSlug={tenantSlug} />}
      </div>
    </div>
  );
}
