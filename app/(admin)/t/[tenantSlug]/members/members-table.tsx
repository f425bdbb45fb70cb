"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { MailPlus, Trash2, Users } from "lucide-react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Badge, StateBadge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { useTRPC } from "@/app/_trpc/client";
import { canGrantRole } from "@/server/auth/policy";
import { TENANT_ROLES, type TenantRole } from "@/server/auth/roles";
import type { InviteDTO } from "@/server/modules/member/invite.types";
import type { MemberDTO } from "@/server/modules/member/member.types";
import { LiveBadge, useLiveChanges } from "../_components/live-changes";
import { useTenantRole } from "../_components/tenant-role";
import { InviteDialog } from "./invite-dialog";

export function MembersHeaderActions({ tenantSlug }: { tenantSlug: string }) {
  const { role, can } = useTenantRole(tenantSlug);
  if (!role || !can("member:manage", false)) return null;
  return <InviteDialog tenantSlug={tenantSlug} myRole={role} />;
}

export function MembersTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { role: myRole, can } = useTenantRole(tenantSlug);
  const me = useQuery(trpc.tenant.me.queryOptions());
  const myEmail = me.data?.principal.kind === "user" ? me.data.principal.email : null;
  const canManage = can("member:manage", false);
  const members = useQuery(trpc.member.list.queryOptions({ tenantSlug }));
  // One stream for the page: members (a role changed elsewhere, an invitation accepted) and invitations.
  const live = useLiveChanges(
    tenantSlug,
    ["member", "invitation"],
    [
      trpc.member.list.pathFilter(),
      trpc.invite.list.pathFilter(),
      trpc.tenant.me.pathFilter(),
      trpc.tenant.overview.pathFilter(),
    ],
  );
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.member.list.queryKey({ tenantSlug }) }),
      queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
    ]);
  const changeRole = useMutation(
    trpc.member.changeRole.mutationOptions({
      onSuccess: async (member) => {
        toast.success(`${member.email} is now ${member.role}.`);
        await refresh();
      },
      onError: (error) => toast.error(error.message),
    }),
  );
  const remove = useMutation(
    trpc.member.remove.mutationOptions({
      onSuccess: async () => {
        toast.success("Member removed.");
        await refresh();
      },
      onError: (error) => toast.error(error.message),
    }),
  );

  // Only roles the signed-in admin may grant, and never on their own row or on someone above them.
  const editable = (member: MemberDTO) =>
    canManage && myRole !== undefined && member.email !== myEmail && canGrantRole(myRole, member.role);

  const columns: ColumnDef<MemberDTO, unknown>[] = [
    {
      id: "name",
      header: "Name",
      accessorFn: (member) => member.name,
      cell: ({ row: { original: member } }) => (
        <div className="flex items-center gap-2.5">
          <span className="bg-muted flex size-7 items-center justify-center rounded-full text-xs font-semibold uppercase">
            {member.name.slice(0, 1) || "?"}
          </span>
          <span className="font-medium">{member.name}</span>
          {member.email === myEmail && <Badge tone="outline">you</Badge>}
        </div>
      ),
    },
    { id: "email", header: "Email", accessorFn: (member) => member.email },
    {
      id: "role",
      header: "Role",
      accessorFn: (member) => member.role,
      cell: ({ row: { original: member } }) =>
        editable(member) && myRole ? (
          <div className="w-32">
            <Select
              aria-label={`Role of ${member.email}`}
              value={member.role}
              disabled={changeRole.isPending}
              onChange={(event) =>
                changeRole.mutate({
                  tenantSlug,
                  userId: member.userId,
                  role: event.target.value as TenantRole,
                })
              }
              className="[&_select]:h-8"
            >
              {TENANT_ROLES.filter((role) => canGrantRole(myRole, role)).map((role) => (
                <option key={role} value={role}>
                  {role}
                </option>
              ))}
            </Select>
          </div>
        ) : (
          <Badge tone={member.role === "owner" ? "info" : "neutral"} data-testid="member-role">
            {member.role}
          </Badge>
        ),
    },
    {
      id: "joined",
      header: "Joined",
      accessorFn: (member) => member.joinedAt.getTime(),
      cell: ({ row: { original: member } }) => <RelativeTime value={member.joinedAt} />,
    },
    {
      id: "actions",
      header: () => <span className="sr-only">Actions</span>,
      enableSorting: false,
      cell: ({ row: { original: member } }) =>
        editable(member) ? (
          <div className="flex justify-end">
            <ConfirmDialog
              title={`Remove ${member.email}?`}
              description="They lose access to this tenant at once. Their account stays; invite them again to bring them back."
              confirmLabel="Remove member"
              onConfirm={() => remove.mutateAsync({ tenantSlug, userId: member.userId }).catch(() => {})}
              trigger={
                <Button variant="ghost" size="sm" aria-label={`Remove ${member.email}`}>
                  <Trash2 className="text-destructive" />
                </Button>
              }
            />
          </div>
        ) : null,
    },
  ];

  return (
    <div className="flex flex-col gap-6">
      <Card>
        {members.error ? (
          <div className="p-5">
            <Alert>{members.error.message}</Alert>
          </div>
        ) : (
          <DataTable
            label="Members"
            columns={columns}
            data={members.data ?? []}
            loading={!members.data}
            rowTestId="member-row"
            filterPlaceholder="Filter members…"
            toolbar={<LiveBadge status={live} />}
            empty={<EmptyState icon={Users} title="No members" />}
          />
        )}
      </Card>
      {canManage && <PendingInvites tenantSlug={tenantSlug} />}
    </div>
  );
}

function PendingInvites({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const invites = useQuery(trpc.invite.list.queryOptions({ tenantSlug }));
  const revoke = useMutation(
    trpc.invite.revoke.mutationOptions({
      onSuccess: async () => {
        toast.success("Invitation revoked.");
        await queryClient.invalidateQueries({ queryKey: trpc.invite.list.queryKey({ tenantSlug }) });
      },
      onError: (error) => toast.error(error.message),
    }),
  );
  const columns: ColumnDef<InviteDTO, unknown>[] = [
    {
      id: "note",
      header: "For",
      accessorFn: (invite) => invite.note,
      cell: ({ row: { original: invite } }) =>
        invite.note || <span className="text-muted-foreground italic">no note</span>,
    },
    { id: "role", header: "Role", accessorFn: (invite) => invite.role },
    {
      id: "state",
      header: "State",
      accessorFn: (invite) => invite.state,
      cell: ({ row: { original: invite } }) => (
        <span className="flex items-center gap-2">
          <StateBadge state={invite.state} data-testid="invite-state" />
          {invite.acceptedByEmail && (
            <span className="text-muted-foreground text-xs">{invite.acceptedByEmail}</span>
          )}
        </span>
      ),
    },
    {
      id: "by",
      header: "Invited by",
      accessorFn: (invite) => invite.createdByEmail ?? "",
      cell: ({ getValue }) => <span className="text-muted-foreground text-xs">{String(getValue())}</span>,
    },
    {
      id: "expires",
      header: "Expires",
      accessorFn: (invite) => invite.expiresAt.getTime(),
      cell: ({ row: { original: invite } }) => <RelativeTime value={invite.expiresAt} />,
    },
    {
      id: "actions",
      header: () => <span className="sr-only">Actions</span>,
      enableSorting: false,
      cell: ({ row: { original: invite } }) =>
        invite.state === "pending" ? (
          <div className="flex justify-end">
            <ConfirmDialog
              title="Revoke this invitation?"
              description="The link stops working at once."
              confirmLabel="Revoke"
              onConfirm={() => revoke.mutateAsync({ tenantSlug, inviteId: invite.id }).catch(() => {})}
              trigger={
                <Button variant="ghost" size="sm">
                  Revoke
                </Button>
              }
            />
          </div>
        ) : null,
    },
  ];
  const pendingCount = invites.data?.filter((invite) => invite.state === "pending").length ?? 0;
  return (
    <Card aria-labelledby="invites-heading">
      <CardHeader>
        <div>
          <CardTitle id="invites-heading">Invitations</CardTitle>
          <CardDescription>
            {pendingCount} pending. Links are single-use; accepted, revoked and expired ones stay listed here.
          </CardDescription>
        </div>
      </CardHeader>
      {invites.error ? (
        <div className="p-5">
          <Alert>{invites.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Invitations"
          columns={columns}
          data={invites.data ?? []}
          loading={!invites.data}
          rowTestId="invite-row"
          pageSize={10}
          empty={
            <EmptyState
              icon={MailPlus}
              title="No invitations yet"
              description="Invite people with a link; they choose their own password."
            />
          }
        />
      )}
    </Card>
  );
}
