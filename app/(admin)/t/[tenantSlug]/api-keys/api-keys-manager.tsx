"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { KeyRound } from "lucide-react";
import { type FormEvent, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { CopyButton } from "@/app/_components/ui/copy-button";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import { canGrantRole } from "@/server/auth/policy";
import { useTenantRole } from "../_components/tenant-role";
import type { AppRouter } from "@/server/api/root";
import type { inferRouterOutputs } from "@trpc/server";

type ApiKeyRow = inferRouterOutputs<AppRouter>["apiKey"]["list"][number];

const GRANTABLE_ROLES = ["viewer", "member", "admin"] as const;
type GrantableRole = (typeof GRANTABLE_ROLES)[number];

export function ApiKeysManager({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const { role: myRole } = useTenantRole(tenantSlug);
  const queryClient = useQueryClient();
  const listOptions = trpc.apiKey.list.queryOptions({ tenantSlug, includeRevoked: true });
  const keys = useQuery(listOptions);
  const [createdKey, setCreatedKey] = useState<{ id: string; name: string; plainKey: string } | null>(null);

  // Only this list changes when a key is created or revoked (and the overview's key count).
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: listOptions.queryKey }),
      queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
    ]);
  const create = useMutation(
    trpc.apiKey.create.mutationOptions({
      onSuccess: async (result) => {
        setCreatedKey({ id: result.apiKey.id, name: result.apiKey.name ?? "", plainKey: result.plainKey });
        await refresh();
      },
    }),
  );
  const revoke = useMutation(
    trpc.apiKey.revoke.mutationOptions({
      onSuccess: async (_result, input) => {
        // A revoked key's secret leaves the page with it.
        setCreatedKey((shown) => (shown?.id === input.apiKeyId ? null : shown));
        toast.success("Key revoked.");
        await refresh();
      },
      onError: (error) => toast.error(error.message),
    }),
  );

  const submitOnce = useSubmitOnce();

  function onCreate(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const formElement = event.currentTarget;
    const form = new FormData(formElement);
    submitOnce((idempotencyKey) => {
      setCreatedKey(null);
      return create
        .mutateAsync({
          tenantSlug,
          idempotencyKey,
          name: formString(form, "name"),
          role:
            GRANTABLE_ROLES.find((role) => role === form.get("role")) ?? ("viewer" satisfies GrantableRole),
        })
        .then(() => formElement.reset());
    });
  }

  const columns: ColumnDef<ApiKeyRow, unknown>[] = [
    {
      id: "name",
      header: "Name",
      accessorFn: (key) => key.name ?? "",
      cell: ({ getValue }) => <span className="font-medium">{String(getValue())}</span>,
    },
    {
      id: "key",
      header: "Key",
      accessorFn: (key) => key.start ?? "",
      cell: ({ row: { original: key } }) => (
        <code className="text-muted-foreground text-xs">{key.start ? `${key.start}…` : "—"}</code>
      ),
    },
    { id: "role", header: "Role", accessorFn: (key) => key.role },
    {
      id: "created",
      header: "Created",
      accessorFn: (key) => key.createdAt.getTime(),
      cell: ({ row: { original: key } }) => <RelativeTime value={key.createdAt} />,
    },
    {
      id: "lastUsed",
      header: "Last used",
      accessorFn: (key) => key.lastUsedAt?.getTime() ?? 0,
      cell: ({ row: { original: key } }) => <RelativeTime value={key.lastUsedAt} fallback="never" />,
    },
    {
      id: "status",
      header: "Status",
      accessorFn: (key) => (key.revokedAt ? "revoked" : "active"),
      cell: ({ getValue }) => <StateBadge state={String(getValue())} />,
    },
    {
      id: "actions",
      header: () => <span className="sr-only">Actions</span>,
      enableSorting: false,
      cell: ({ row: { original: key } }) =>
        key.revokedAt ? null : (
          <div className="flex justify-end">
            <ConfirmDialog
              title={`Revoke key ${key.name ?? ""}?`}
              description="Every client using this key is refused from now on. This cannot be undone."
              confirmLabel="Revoke key"
              onConfirm={() => revoke.mutateAsync({ tenantSlug, apiKeyId: key.id }).catch(() => {})}
              trigger={
                <Button variant="ghost" size="sm" className="text-destructive" disabled={revoke.isPending}>
                  Revoke
                </Button>
              }
            />
          </div>
        ),
    },
  ];

  return (
    <div className="flex flex-col gap-6">
      <Card aria-labelledby="new-key-heading">
        <CardHeader>
          <div>
            <CardTitle id="new-key-heading">New key</CardTitle>
            <CardDescription>The secret is shown once, right after it is created.</CardDescription>
          </div>
        </CardHeader>
        <CardContent>
          <form
            className="flex flex-wrap items-end gap-3"
            onSubmit={onCreate}
            onChange={resetErrorOnEdit(create)}
            aria-label="Create API key"
          >
            <Field label="Name" className="w-64">
              <Input name="name" required maxLength={64} placeholder="ci-pipeline" />
            </Field>
            <Field label="Role" className="w-40">
              <Select name="role" defaultValue="member">
                {/* A key never gets more than its creator holds: the API refuses the rest. */}
                {GRANTABLE_ROLES.filter((role) => !myRole || canGrantRole(myRole, role)).map((role) => (
                  <option key={role} value={role}>
                    {role}
                  </option>
                ))}
              </Select>
            </Field>
            <Button type="submit" disabled={create.isPending}>
              {create.isPending ? "Creating…" : "Create key"}
            </Button>
          </form>
          {create.error && <Alert className="mt-3">{create.error.message}</Alert>}
          {createdKey && (
            <Alert tone="success" className="mt-3" data-testid="created-key">
              <p>
                Key <strong>{createdKey.name}</strong> created. Copy it now: it is shown only once.
              </p>
              <div className="bg-background text-foreground mt-2 flex items-center gap-1 rounded-md border p-1 pl-3">
                <code className="min-w-0 flex-1 text-xs break-all" data-testid="created-key-value">
                  {createdKey.plainKey}
                </code>
                <CopyButton value={createdKey.plainKey} label="Copy API key" />
              </div>
            </Alert>
          )}
        </CardContent>
      </Card>

      <Card aria-labelledby="keys-heading">
        <CardHeader>
          <CardTitle id="keys-heading">Keys</CardTitle>
        </CardHeader>
        {keys.error ? (
          <div className="p-5">
            <Alert>{keys.error.message}</Alert>
          </div>
        ) : (
          <DataTable
            label="API keys"
            columns={columns}
            data={keys.data ?? []}
            loading={!keys.data}
            rowTestId="api-key-row"
            empty={
              <EmptyState
                icon={KeyRound}
                title="No keys yet"
                description="Create one for a script or a typed client."
              />
            }
          />
        )}
      </Card>
    </div>
  );
}
