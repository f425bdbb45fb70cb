"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { MessagesSquare, Trash2 } from "lucide-react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { type FormEvent, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { CopyableId } from "@/app/_components/ui/copy-button";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import { AgentFields } from "../agent-fields";
import { type AgentDefaultsValue, defaultsOf, readAgentFields, settingsPatchOf } from "../agent-form";
import { agentDeleteConfirmText, formText, isolationLabel, KeyBadge, ServerErrors } from "../agent-ui";
import { useTenantRole } from "../../_components/tenant-role";
import { NewSessionButton } from "../../sessions/new-session";
import { TestConnection } from "./test-connection";
import { resetErrorOnEdit, useSubmitOnce } from "@/app/_components/ui/use-submit-once";
import { checkEnvRows, type EnvRow, envRowsOf } from "../../_components/env-editor";

export function AgentEditor({ tenantSlug, agentId }: { tenantSlug: string; agentId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const agent = useQuery(trpc.agent.get.queryOptions({ tenantSlug, agentId }));
  // Unsaved edits of the defaults; null: the stored ones.
  const [defaults, setDefaults] = useState<AgentDefaultsValue | null>(null);
  // Unsaved rows of the environment variables; null: the stored ones.
  const [envRows, setEnvRows] = useState<EnvRow[] | null>(null);
  const submitOnce = useSubmitOnce();
  const { can } = useTenantRole(tenantSlug);
  const canManage = can("agent:manage", false);

  // The library's "used by" follows the agent's defaults.
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.agent.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.library.pathKey() }),
    ]);
  const save = useMutation(trpc.agent.update.mutationOptions({ onSuccess: refresh }));
  const setKey = useMutation(trpc.agent.update.mutationOptions({ onSuccess: refresh }));
  const remove = useMutation(
    trpc.agent.delete.mutationOptions({
      onSuccess: async () => {
        await Promise.all([
          refresh(),
          queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
          queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
        ]);
        router.push(`/t/${encodeURIComponent(tenantSlug)}/agents`);
      },
    }),
  );

  if (agent.error) return <Alert>{agent.error.message}</Alert>;
  if (!agent.data) return <Skeleton className="h-64 w-full" />;
  const current = agent.data;

  function onSave(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const values = readAgentFields(new FormData(event.currentTarget));
    // Each refused row says why next to it; nothing goes until they are fixed.
    const { env } = checkEnvRows(envRows ?? envRowsOf(current.env));
    if (!env) {
      toast.error("Fix the environment variables first.");
      return;
    }
    const patch = settingsPatchOf(current, values, defaults ?? defaultsOf(current), env);
    if (Object.keys(patch).length === 0) {
      toast.info("Nothing changed.");
      return;
    }
    // A second click before the button re-renders disabled would send the patch again.
    submitOnce(() =>
      save.mutateAsync({ tenantSlug, agentId, patch }).then(() => {
        // The stored values are the truth again (the form remounts from them).
        setDefaults(null);
        setEnvRows(null);
        toast.success("Saved.");
      }),
    );
  }

  function onReplaceKey(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const formElement = event.currentTarget;
    const key = formText(new FormData(formElement), "apiKey");
    if (!key) return;
    setKey.mutate(
      { tenantSlug, agentId, patch: { modelApiKey: key } },
      {
        onSuccess: () => {
          formElement.reset();
          toast.success("Key replaced.");
        },
      },
    );
  }

  const clearKey = () =>
    setKey
      .mutateAsync({ tenantSlug, agentId, patch: { modelApiKey: null } })
      .then(() => toast.success("Key cleared."))
      .catch(() => {});

  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const sessionsHref = `${base}/sessions?agent=${encodeURIComponent(agentId)}`;
  const readOnly = !canManage;
  return (
    <>
      <PageHeader
        breadcrumb={
          <Link href={`${base}/agents`} className="hover:text-foreground">
            ← Agents
          </Link>
        }
        title={current.name}
        description={
          <span className="flex flex-wrap items-center gap-x-3 gap-y-1">
            {current.description || "No description."}
            <CopyableId value={current.id} />
          </span>
        }
        actions={
          <>
            <Button asChild variant="outline" size="sm">
              <Link href={sessionsHref}>
                <MessagesSquare /> Sessions
              </Link>
            </Button>
            <NewSessionButton tenantSlug={tenantSlug} agentId={agentId} />
          </>
        }
      />

      <div className="grid gap-6 lg:grid-cols-[1fr_20rem]">
        <Card aria-labelledby="settings-heading">
          <CardHeader>
            <div>
              <CardTitle id="settings-heading">Settings</CardTitle>
              <CardDescription>
                A change applies to the next turn; a new isolation policy applies to sessions created
                afterwards.
              </CardDescription>
            </div>
          </CardHeader>
          <CardContent>
            {/* Remounted after each save so the fields start from the stored values again. */}
            <form
              key={current.updatedAt.getTime()}
              className="grid gap-4 sm:grid-cols-2"
              onSubmit={onSave}
              onChange={resetErrorOnEdit(save)}
              aria-label="Edit agent"
            >
              <fieldset disabled={readOnly} className="contents">
                <AgentFields
                  tenantSlug={tenantSlug}
                  agent={current}
                  defaults={defaults ?? defaultsOf(current)}
                  onDefaultsChange={setDefaults}
                  env={envRows ?? envRowsOf(current.env)}
                  onEnvChange={setEnvRows}
                  readOnly={readOnly}
                />
                <div className="flex items-center gap-3 sm:col-span-2">
                  <Button type="submit" disabled={save.isPending}>
                    {save.isPending ? "Saving…" : "Save changes"}
                  </Button>
                  <span className="text-muted-foreground text-xs">
                    Workspaces: {isolationLabel(current.isolationPolicy)} · updated{" "}
                    <RelativeTime value={current.updatedAt} />
                  </span>
                </div>
              </fieldset>
            </form>
            <ServerErrors error={save.error} />
          </CardContent>
        </Card>

        <div className="flex flex-col gap-6">
          <Card aria-labelledby="key-heading">
            <CardHeader>
              <div>
                <CardTitle id="key-heading" className="flex items-center gap-2">
                  Provider API key <KeyBadge hasApiKey={current.hasApiKey} />
                </CardTitle>
                <CardDescription>
                  Stored encrypted, used only to call the model, never shown again.
                </CardDescription>
              </div>
            </CardHeader>
            <CardContent className="grid gap-3">
              {canManage ? (
                <>
                  <form
                    className="grid gap-3"
                    onSubmit={onReplaceKey}
                    onChange={resetErrorOnEdit(setKey)}
                    aria-label="Replace API key"
                  >
                    <Field label="New key">
                      <Input
                        name="apiKey"
                        type="password"
                        autoComplete="new-password"
                        required
                        maxLength={4096}
                      />
                    </Field>
                    <Button type="submit" variant="outline" disabled={setKey.isPending}>
                      {current.hasApiKey ? "Replace key" : "Set key"}
                    </Button>
                  </form>
                  {current.hasApiKey && (
                    <ConfirmDialog
                      title="Clear the API key?"
                      description={`Remove the API key of "${current.name}"? Its model is then called without a key until a new one is set.`}
                      confirmLabel="Clear key"
                      onConfirm={clearKey}
                      trigger={
                        <Button variant="ghost" className="text-destructive" disabled={setKey.isPending}>
                          Clear key
                        </Button>
                      }
                    />
                  )}
                </>
              ) : (
                <p className="text-muted-foreground text-xs">Changing the key needs the admin role.</p>
              )}
              <ServerErrors error={setKey.error} />
            </CardContent>
          </Card>

          {canManage && (
            <Card aria-labelledby="connection-heading">
              <CardHeader>
                <div>
                  <CardTitle id="connection-heading">Connection</CardTitle>
                  <CardDescription>
                    Sends one tiny request to the model with the saved URL, model and key.
                  </CardDescription>
                </div>
              </CardHeader>
              <CardContent>
                <TestConnection tenantSlug={tenantSlug} agentId={agentId} />
              </CardContent>
            </Card>
          )}

          {canManage && (
            <Card aria-labelledby="delete-heading" className="border-destructive/30">
              <CardHeader>
                <div>
                  <CardTitle id="delete-heading">Delete agent</CardTitle>
                  <CardDescription>
                    Deletes the agent and its sessions with their history, then purges its skills and MCP
                    scopes from the workspaces it used.
                  </CardDescription>
                </div>
              </CardHeader>
              <CardContent>
                <ConfirmDialog
                  title={`Delete agent ${current.name}?`}
                  description={agentDeleteConfirmText(current.name)}
                  confirmLabel="Delete agent"
                  onConfirm={() => remove.mutateAsync({ tenantSlug, agentId }).catch(() => {})}
                  trigger={
                    <Button variant="destructive" disabled={remove.isPending}>
                      <Trash2 /> Delete agent
                    </Button>
                  }
                />
                <ServerErrors error={remove.error} />
              </CardContent>
            </Card>
          )}
        </div>
      </div>
    </>
  );
}
