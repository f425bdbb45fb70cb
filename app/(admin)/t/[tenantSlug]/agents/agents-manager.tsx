"use client";

import { useInfiniteQuery, useMutation, useQueryClient } from "@tanstack/react-query";
import { Bot, Trash2 } from "lucide-react";
import Link from "next/link";
import { type FormEvent, useRef, useState } from "react";
import { toast } from "sonner";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { useTRPC } from "@/app/_trpc/client";
import type { AgentView } from "@/server/modules/agent/agent.schema";
import { AgentFields } from "./agent-fields";
import { type AgentDefaultsValue, createRequestOf, readAgentFields } from "./agent-form";
import { agentDeleteConfirmText, isolationLabel, KeyBadge, ServerErrors } from "./agent-ui";
import { checkEnvRows, type EnvRow } from "../_components/env-editor";
import { LoadMore } from "../_components/load-more";
import { NewSessionButton } from "../sessions/new-session";
import { useTenantRole } from "../_components/tenant-role";

const PAGE_SIZE = 50;
const NO_DEFAULTS: AgentDefaultsValue = { mcps: [], skills: [] };

export function AgentsManager({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { can } = useTenantRole(tenantSlug);
  const canManage = can("agent:manage", false);
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const agents = useInfiniteQuery(
    trpc.agent.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  const formRef = useRef<HTMLFormElement>(null);
  const [defaults, setDefaults] = useState<AgentDefaultsValue>(NO_DEFAULTS);
  const [envRows, setEnvRows] = useState<EnvRow[]>([]);

  // Every agent query (list pages, details), the overview's counts and the library's "used by" change with
  // a create or delete; a deleted agent's sessions go too.
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.agent.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
      // The library says which agents' defaults use each entry.
      queryClient.invalidateQueries({ queryKey: trpc.library.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
    ]);
  const create = useMutation(
    trpc.agent.create.mutationOptions({
      onSuccess: async (agent) => {
        // Cleared only on success, so a rejected form keeps what was typed (the key field included).
        formRef.current?.reset();
        setDefaults(NO_DEFAULTS);
        setEnvRows([]);
        toast.success(`Agent ${agent.name} created.`);
        await refresh();
      },
    }),
  );
  const remove = useMutation(
    trpc.agent.delete.mutationOptions({
      onSuccess: async () => {
        toast.success("Agent deleted.");
        await refresh();
      },
    }),
  );

  const submitOnce = useSubmitOnce();

  function onCreate(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    // Each refused row says why next to it; nothing goes until they are fixed.
    const { env } = checkEnvRows(envRows);
    if (!env) {
      toast.error("Fix the environment variables first.");
      return;
    }
    const request = createRequestOf(readAgentFields(new FormData(event.currentTarget)), defaults, env);
    submitOnce((idempotencyKey) => create.mutateAsync({ tenantSlug, ...request, idempotencyKey }));
  }

  const columns: ColumnDef<AgentView, unknown>[] = [
    {
      id: "name",
      header: "Name",
      accessorFn: (agent) => agent.name,
      cell: ({ row: { original: agent } }) => (
        <div className="min-w-40">
          <Link
            className="font-medium hover:underline"
            href={`${base}/agents/${encodeURIComponent(agent.id)}`}
          >
            {agent.name}
          </Link>
          {agent.description && (
            <div className="text-muted-foreground line-clamp-1 max-w-xs text-xs">{agent.description}</div>
          )}
        </div>
      ),
    },
    {
      id: "model",
      header: "Model",
      accessorFn: (agent) => agent.modelConfig.model,
      cell: ({ row: { original: agent } }) => (
        <div>
          <span className="font-mono text-xs" data-testid="agent-model">
            {agent.modelConfig.model}
          </span>
          <div className="text-muted-foreground text-xs">{agent.modelConfig.provider}</div>
        </div>
      ),
    },
    {
      id: "isolation",
      header: "Isolation",
      accessorFn: (agent) => isolationLabel(agent.isolationPolicy),
      cell: ({ getValue }) => <span className="text-muted-foreground text-xs">{String(getValue())}</span>,
    },
    {
      id: "key",
      header: "Key",
      accessorFn: (agent) => (agent.hasApiKey ? "key set" : "no key"),
      cell: ({ row: { original: agent } }) => <KeyBadge hasApiKey={agent.hasApiKey} />,
    },
    {
      id: "created",
      header: "Created",
      accessorFn: (agent) => agent.createdAt.getTime(),
      cell: ({ row: { original: agent } }) => <RelativeTime value={agent.createdAt} />,
    },
    {
      id: "actions",
      header: () => <span className="sr-only">Actions</span>,
      enableSorting: false,
      cell: ({ row: { original: agent } }) => (
        <div className="flex justify-end gap-1">
          <NewSessionButton tenantSlug={tenantSlug} agentId={agent.id} variant="ghost" />
          {canManage && (
            <ConfirmDialog
              title={`Delete agent ${agent.name}?`}
              description={agentDeleteConfirmText(agent.name)}
              confirmLabel="Delete agent"
              onConfirm={() => remove.mutateAsync({ tenantSlug, agentId: agent.id }).catch(() => {})}
              trigger={
                <Button variant="ghost" size="sm" aria-label="Delete" disabled={remove.isPending}>
                  <Trash2 className="text-destructive" />
                </Button>
              }
            />
          )}
        </div>
      ),
    },
  ];

  const items = agents.data?.pages.flatMap((page) => page.items) ?? [];
  return (
    <div className="flex flex-col gap-6">
      <Card aria-labelledby="agents-heading">
        <CardHeader>
          <CardTitle id="agents-heading">Agents</CardTitle>
        </CardHeader>
        {agents.error ? (
          <CardContent>
            <ServerErrors error={agents.error} />
          </CardContent>
        ) : (
          <DataTable
            label="Agents"
            columns={columns}
            data={items}
            loading={!agents.data}
            rowTestId="agent-row"
            filterPlaceholder="Filter agents…"
            empty={
              <EmptyState
                icon={Bot}
                title="No agents yet"
                description="An agent is a model endpoint with a prompt, tools and workspace defaults."
              />
            }
          />
        )}
        <LoadMore query={agents} />
        {remove.error && (
          <CardContent>
            <ServerErrors error={remove.error} />
          </CardContent>
        )}
      </Card>

      {canManage && (
        <Card aria-labelledby="new-agent-heading">
          <CardHeader>
            <div>
              <CardTitle id="new-agent-heading">New agent</CardTitle>
              <CardDescription>Any OpenAI-compatible endpoint. The key is stored encrypted.</CardDescription>
            </div>
          </CardHeader>
          <CardContent>
            <form
              ref={formRef}
              onSubmit={onCreate}
              onChange={resetErrorOnEdit(create)}
              aria-label="Create agent"
              className="grid gap-4 sm:grid-cols-2"
            >
              <AgentFields
                tenantSlug={tenantSlug}
                defaults={defaults}
                onDefaultsChange={setDefaults}
                env={envRows}
                onEnvChange={setEnvRows}
              />
              <div className="flex items-center gap-3 sm:col-span-2">
                <Button type="submit" disabled={create.isPending}>
                  {create.isPending ? "Creating…" : "Create agent"}
                </Button>
              </div>
            </form>
            <ServerErrors error={create.error} />
          </CardContent>
        </Card>
      )}
    </div>
  );
}
