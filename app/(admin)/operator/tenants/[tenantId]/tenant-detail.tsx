"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { Pause, Play, Trash2, UserPlus } from "lucide-react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { useTRPC } from "@/app/_trpc/client";
import { InviteLinkBox } from "../../_components/invite-link";
import { TenantQuotas } from "./tenant-quotas";
import { useSubmitOnce } from "@/app/_components/ui/use-submit-once";

/** One tenant for operators: usage, owners and owner invitations, suspend / resume / delete, its audit. */
export function TenantDetail({ tenantId }: { tenantId: string }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const tenant = useQuery(trpc.operator.tenants.get.queryOptions({ tenantId }));
  const audit = useQuery(trpc.operator.audit.queryOptions({ targetId: tenantId, limit: 50 }));
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.operator.pathKey() });
  const onError = (error: { message: string }) => toast.error(error.message);
  const suspend = useMutation(
    trpc.operator.tenants.suspend.mutationOptions({
      onSuccess: async ({ stopsRequested }) => {
        toast.success(`Suspended; stopping ${stopsRequested.length} workspace(s).`);
        await refresh();
      },
      onError,
    }),
  );
  const resume = useMutation(
    trpc.operator.tenants.resume.mutationOptions({
      onSuccess: async () => {
        toast.success("Resumed.");
        await refresh();
      },
      onError,
    }),
  );
  const remove = useMutation(
    trpc.operator.tenants.delete.mutationOptions({
      onSuccess: async () => {
        toast.success("Deletion queued: its workspaces are purged, then its rows; a receipt is kept.");
        await refresh();
        router.push("/operator");
      },
      onError,
    }),
  );
  const invite = useMutation(
    trpc.operator.tenants.inviteOwner.mutationOptions({ onSuccess: refresh, onError }),
  );

  const submitOnce = useSubmitOnce();

  if (tenant.error) return <Alert>{tenant.error.message}</Alert>;
  if (!tenant.data) return <p className="text-muted-foreground text-sm">Loading…</p>;
  const t = tenant.data;
  const usage = [
    ["Members", t.usage.members],
    ["Agents", t.usage.agents],
    ["Workspaces live", t.usage.workspacesLive],
    ["Workspaces total", t.usage.workspacesTotal],
    ["Sessions", t.usage.sessions],
  ] as const;

  return (
    <>
      <PageHeader
        breadcrumb={<Link href="/operator">Tenants</Link>}
        title={
          <span className="flex items-center gap-3">
            {t.name} <StateBadge state={t.status} data-testid="tenant-status" />
          </span>
        }
        description={
          <>
            /{t.slug} · created <RelativeTime value={t.createdAt} />
          </>
        }
        actions={
          <>
            {t.status === "active" && (
              <ConfirmDialog
                trigger={
                  <Button variant="outline" size="sm">
                    <Pause /> Suspend
                  </Button>
                }
                title={`Suspend ${t.name}?`}
                description="Its workspaces stop and its members, API keys and jobs are refused until you resume it. Nothing is deleted."
                confirmLabel="Suspend"
                onConfirm={() => suspend.mutate({ tenantId: t.id })}
              />
            )}
            {t.status === "suspended" && (
              <Button variant="outline" size="sm" onClick={() => resume.mutate({ tenantId: t.id })}>
                <Play /> Resume
              </Button>
            )}
            {t.status !== "deleting" && (
              <ConfirmDialog
                trigger={
                  <Button variant="destructive" size="sm">
                    <Trash2 /> Delete
                  </Button>
                }
                title={`Delete ${t.name}?`}
                description="Every workspace is purged on its backend, then every row of the tenant and the accounts that belong only to it. A deletion receipt is kept. This cannot be undone."
                confirmLabel="Delete tenant"
                destructive
                onConfirm={() => remove.mutate({ tenantId: t.id })}
              />
            )}
          </>
        }
      />
      {t.status === "deleting" && (
        <Alert tone="info" className="mb-6">
          Being deleted: the workers are purging its workspaces.
        </Alert>
      )}
      <div className="mb-6 grid grid-cols-2 gap-3 sm:grid-cols-5" data-testid="tenant-usage">
        {usage.map(([label, value]) => (
          <Card key={label} className="px-4 py-3">
            <div className="text-muted-foreground text-xs">{label}</div>
            <div className="text-xl font-semibold tabular-nums">{value}</div>
          </Card>
        ))}
      </div>
      <div className="grid gap-6 lg:grid-cols-2">
        <Card>
          <CardHeader>
            <CardTitle>Owners</CardTitle>
            <CardDescription>
              Owners run the tenant; a new one joins through an owner invitation.
            </CardDescription>
          </CardHeader>
          <CardContent className="grid gap-3">
            {t.owners.length === 0 && <p className="text-muted-foreground text-sm">No owner yet.</p>}
            {t.owners.map((owner) => (
              <p key={owner.userId} className="text-sm" data-testid="tenant-owner">
                {owner.name} <span className="text-muted-foreground">{owner.email}</span>
              </p>
            ))}
            <ul className="grid gap-1 text-sm">
              {t.ownerInvites.map((i) => (
                <li key={i.id} className="flex items-center gap-2">
                  <StateBadge state={i.state} /> owner invitation
                  {i.acceptedByEmail ? ` accepted by ${i.acceptedByEmail}` : ""} · until{" "}
                  <RelativeTime value={i.expiresAt} />
                </li>
              ))}
            </ul>
            {invite.data ? (
              <InviteLinkBox path={invite.data.path} />
            ) : (
              t.status !== "deleting" && (
                <Button
                  variant="outline"
                  size="sm"
                  className="justify-self-start"
                  disabled={invite.isPending}
                  onClick={() =>
                    submitOnce((idempotencyKey) => invite.mutateAsync({ tenantId: t.id, idempotencyKey }))
                  }
                >
                  <UserPlus /> New owner invitation
                </Button>
              )
            )}
          </CardContent>
        </Card>
        {t.status !== "deleting" && <TenantQuotas tenantId={t.id} />}
        <Card>
          <CardHeader>
            <CardTitle>Operator audit</CardTitle>
            <CardDescription>
              Lifecycle changes of this tenant (its own audit log stays in the tenant).
            </CardDescription>
          </CardHeader>
          <CardContent>
            <ul className="grid gap-1.5 text-sm" data-testid="tenant-operator-audit">
              {(audit.data ?? []).map((row) => (
                <li key={row.id} className="flex flex-wrap items-center gap-2">
                  <code className="text-xs">{row.action}</code>
                  <span className="text-muted-foreground">
                    {row.actorEmail ?? row.actorId ?? row.actorType} · <RelativeTime value={row.at} />
                  </span>
                </li>
              ))}
            </ul>
          </CardContent>
        </Card>
      </div>
    </>
  );
}
