"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { type FormEvent, useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import type { AgentView, TAgentUpdateRequest } from "@/server/modules/agent/agent.schema";
import {
  agentDeleteConfirmText,
  formText,
  ISOLATION_OPTIONS,
  isolationLabel,
  KeyBadge,
  parseIsolation,
  ServerErrors,
} from "../agent-ui";

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
  const [notice, setNotice] = useState<string | null>(null);

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

  if (agent.error) {
    return (
      <div className="alert error" role="alert">
        {agent.error.message}
      </div>
    );
  }
  if (!agent.data) return <p className="muted">Loading…</p>;
  const current = agent.data;

  function onSave(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setNotice(null);
    const patch = settingsPatch(current, new FormData(event.currentTarget));
    if (Object.keys(patch).length === 0) {
      setNotice("Nothing changed.");
      return;
    }
    save.mutate({ tenantSlug, agentId, patch }, { onSuccess: () => setNotice("Saved.") });
  }

  function onReplaceKey(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setNotice(null);
    const formElement = event.currentTarget;
    const key = formText(new FormData(formElement), "apiKey");
    if (!key) return;
    setKey.mutate(
      { tenantSlug, agentId, patch: { modelApiKey: key } },
      {
        onSuccess: () => {
          formElement.reset();
          setNotice("Key replaced.");
        },
      },
    );
  }

  function onClearKey() {
    if (
      !window.confirm(
        `Remove the API key of "${current.name}"? Its model is then called without a key until a new one is set.`,
      )
    )
      return;
    setNotice(null);
    setKey.mutate(
      { tenantSlug, agentId, patch: { modelApiKey: null } },
      { onSuccess: () => setNotice("Key cleared.") },
    );
  }

  const sessionsHref = `/t/${encodeURIComponent(tenantSlug)}/sessions?agent=${encodeURIComponent(agentId)}`;
  return (
    <>
      <h1>{current.name}</h1>
      <p className="lead">
        {current.description || "No description."} · <Link href={sessionsHref}>Sessions</Link>
      </p>
      {notice && (
        <div className="alert success" role="status" style={{ marginBottom: 16 }}>
          {notice}
        </div>
      )}

      <section className="panel" aria-labelledby="settings-heading">
        <h2 id="settings-heading">Settings</h2>
        {/* Remounted after each save so the fields start from the stored values again. */}
        <form
          key={current.updatedAt.getTime()}
          className="form-row"
          onSubmit={onSave}
          aria-label="Edit agent"
        >
          <label>
            Name
            <input name="name" required maxLength={64} defaultValue={current.name} />
          </label>
          <label>
            Description
            <input name="description" maxLength={2000} defaultValue={current.description} />
          </label>
          <label>
            Provider
            <input name="provider" required maxLength={50} defaultValue={current.modelConfig.provider} />
          </label>
          <label>
            Model
            <input name="model" required maxLength={200} defaultValue={current.modelConfig.model} />
          </label>
          <label>
            Base URL
            <input name="baseUrl" defaultValue={current.modelConfig.baseUrl ?? ""} />
          </label>
          <label>
            Isolation
            <select name="isolationPolicy" defaultValue={current.isolationPolicy ?? ""}>
              {ISOLATION_OPTIONS.map((option) => (
                <option key={option.value} value={option.value}>
                  {option.label}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" disabled={save.isPending}>
            {save.isPending ? "Saving…" : "Save changes"}
          </button>
        </form>
        <ServerErrors error={save.error} />
        <p className="muted" style={{ marginBottom: 0 }}>
          Workspaces: {isolationLabel(current.isolationPolicy)}. A change applies to sessions created
          afterwards; existing sessions keep their workspace. Created {current.createdAt.toLocaleString()}.
        </p>
      </section>

      <section className="panel" aria-labelledby="key-heading">
        <h2 id="key-heading">
          Provider API key <KeyBadge hasApiKey={current.hasApiKey} />
        </h2>
        <p className="muted">
          Stored encrypted and used only to call the model; it is never shown again, here or in the API.
        </p>
        <div className="form-row">
          <form className="form-row" onSubmit={onReplaceKey} aria-label="Replace API key">
            <label>
              New key
              <input name="apiKey" type="password" autoComplete="new-password" required maxLength={4096} />
            </label>
            <button type="submit" disabled={setKey.isPending}>
              {current.hasApiKey ? "Replace key" : "Set key"}
            </button>
          </form>
          {current.hasApiKey && (
            <button type="button" className="danger" disabled={setKey.isPending} onClick={onClearKey}>
              Clear key
            </button>
          )}
        </div>
        <ServerErrors error={setKey.error} />
      </section>

      <section className="panel" aria-labelledby="delete-heading">
        <h2 id="delete-heading">Delete</h2>
        <p className="muted">
          Deletes the agent and every one of its sessions with their chat history, then purges its skills and
          MCP scopes from the workspaces it used.
        </p>
        <button
          type="button"
          className="danger"
          disabled={remove.isPending}
          onClick={() => {
            if (window.confirm(agentDeleteConfirmText(current.name))) remove.mutate({ tenantSlug, agentId });
          }}
        >
          Delete agent
        </button>
        <ServerErrors error={remove.error} />
      </section>
    </>
  );
}
