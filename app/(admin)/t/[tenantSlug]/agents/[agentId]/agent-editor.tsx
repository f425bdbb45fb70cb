"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { MessagesSquare, Trash2 } from "lucide-react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import type { FormEvent } from "react";
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
import { Select } from "@/app/_components/ui/select";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { Textarea } from "@/app/_components/ui/textarea";
import { useTRPC } from "@/app/_trpc/client";
import type { AgentView, TAgentUpdateRequest } from "@/server/modules/agent/agent.schema";
import {
  agentDeleteConfirmText,
  formText,
  ISOLATION_HELP,
  ISOLATION_OPTIONS,
  isolationLabel,
  KeyBadge,
  parseIsolation,
  ServerErrors,
} from "../agent-ui";
import { useTenantRole } from "../../_components/tenant-role";
import { NewSessionButton } from "../../sessions/new-session";
import { TestConnection } from "./test-connection";

/** "" → null (removes the setting); anything else as a number (the server validates the range). */
const optionalNumber = (text: string): number | null => (text === "" ? null : Number(text));

/** Only what differs from the stored agent: the update is a partial patch, absent fields stay as stored. */
function settingsPatch(agent: AgentView, form: FormData): TAgentUpdateRequest {
  const patch: TAgentUpdateRequest = {};
  const modelConfig: NonNullable<TAgentUpdateRequest["modelConfig"]> = {};
  const name = formText(form, "name");
  if (name !== agent.name) patch.name = name;
  const description = formText(form, "description");
  if (description !== agent.description) patch.description = description;
  const provider = formText(form, "provider");
  if (provider !== agent.modelConfig.provider) modelConfig.provider = provider;
  const model = formText(form, "model");
  if (model !== agent.modelConfig.model) modelConfig.model = model;
  const baseUrl = formText(form, "baseUrl");
  // An emptied base URL removes the stored one (null), as the patch schema defines.
  if (baseUrl !== (agent.modelConfig.baseUrl ?? "")) modelConfig.baseUrl = baseUrl || null;
  const temperature = optionalNumber(formText(form, "temperature"));
  if (temperature !== (agent.modelConfig.temperature ?? null)) modelConfig.temperature = temperature;
  const maxOutputTokens = optionalNumber(formText(form, "maxOutputTokens"));
  if (maxOutputTokens !== (agent.modelConfig.maxOutputTokens ?? null))
    modelConfig.maxOutputTokens = maxOutputTokens;
  if (Object.keys(modelConfig).length > 0) patch.modelConfig = modelConfig;
  const isolationPolicy = parseIsolation(form.get("isolationPolicy"));
  if (isolationPolicy !== agent.isolationPolicy) patch.isolationPolicy = isolationPolicy;
  return patch;
}

export function AgentEditor({ tenantSlug, agentId }: { tenantSlug: string; agentId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const agent = useQuery(trpc.agent.get.queryOptions({ tenantSlug, agentId }));
  const { can } = useTenantRole(tenantSlug);
  const canManage = can("agent:manage", false);

  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.agent.pathKey() });
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
    const patch = settingsPatch(current, new FormData(event.currentTarget));
    if (Object.keys(patch).length === 0) {
      toast.info("Nothing changed.");
      return;
    }
    save.mutate({ tenantSlug, agentId, patch }, { onSuccess: () => toast.success("Saved.") });
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
              aria-label="Edit agent"
            >
              <fieldset disabled={readOnly} className="contents">
                <Field label="Name">
                  <Input name="name" required maxLength={64} defaultValue={current.name} />
                </Field>
                <Field label="Model">
                  <Input name="model" required maxLength={200} defaultValue={current.modelConfig.model} />
                </Field>
                <Field label="Description" className="sm:col-span-2" hint="What the agent is for.">
                  <Textarea name="description" rows={2} maxLength={2000} defaultValue={current.description} />
                </Field>
                <Field label="Provider">
                  <Input
                    name="provider"
                    required
                    maxLength={50}
                    defaultValue={current.modelConfig.provider}
                  />
                </Field>
                <Field label="Base URL">
                  <Input name="baseUrl" defaultValue={current.modelConfig.baseUrl ?? ""} />
                </Field>
                <Field label="Temperature" hint="0–2; empty: the provider's default. Lower is more focused.">
                  <Input
                    name="temperature"
                    type="number"
                    step="0.1"
                    min={0}
                    max={2}
                    defaultValue={current.modelConfig.temperature ?? ""}
                  />
                </Field>
                <Field label="Max output tokens" hint="Per model call; empty: the provider's default.">
                  <Input
                    name="maxOutputTokens"
                    type="number"
                    min={1}
                    step={1}
                    defaultValue={current.modelConfig.maxOutputTokens ?? ""}
                  />
                </Field>
                <Field label="Isolation" className="sm:col-span-2" hint={ISOLATION_HELP}>
                  <Select name="isolationPolicy" defaultValue={current.isolationPolicy ?? ""}>
                    {ISOLATION_OPTIONS.map((option) => (
                      <option key={option.value} value={option.value}>
                        {option.label}
                      </option>
                    ))}
                  </Select>
                </Field>
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
                  <form className="grid gap-3" onSubmit={onReplaceKey} aria-label="Replace API key">
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
