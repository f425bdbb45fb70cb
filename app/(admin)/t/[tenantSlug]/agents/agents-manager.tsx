"use client";

import { useInfiniteQuery, useMutation, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { type FormEvent, useRef, useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import {
  agentDeleteConfirmText,
  formText,
  ISOLATION_OPTIONS,
  isolationLabel,
  KeyBadge,
  parseIsolation,
  ServerErrors,
} from "./agent-ui";
import { LoadMore } from "../_components/load-more";

const PAGE_SIZE = 50;
const DEFAULT_PROVIDER = "openai-compatible";

export function AgentsManager({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const agents = useInfiniteQuery(
    trpc.agent.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  const formRef = useRef<HTMLFormElement>(null);
  const [created, setCreated] = useState<string | null>(null);

  // Every agent query (list pages, details) and the overview's counts change with a create or delete;
  // a deleted agent's sessions go too.
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.agent.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
    ]);
  const create = useMutation(
    trpc.agent.create.mutationOptions({
      onSuccess: async (agent) => {
        // Cleared only on success, so a rejected form keeps what was typed (the key field included).
        formRef.current?.reset();
        setCreated(agent.name);
        await refresh();
      },
    }),
  );
  const remove = useMutation(trpc.agent.delete.mutationOptions({ onSuccess: refresh }));

  function onCreate(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setCreated(null);
    const baseUrl = formText(form, "baseUrl");
    const apiKey = formText(form, "apiKey");
    create.mutate({
      tenantSlug,
      name: formText(form, "name"),
      description: formText(form, "description"),
      modelConfig: {
        provider: formText(form, "provider") || DEFAULT_PROVIDER,
        model: formText(form, "model"),
        ...(baseUrl ? { baseUrl } : {}),
      },
      ...(apiKey ? { modelApiKey: apiKey } : {}),
      isolationPolicy: parseIsolation(form.get("isolationPolicy")),
    });
  }

  function onDelete(agent: { id: string; name: string }) {
    if (!window.confirm(agentDeleteConfirmText(agent.name))) return;
    remove.mutate({ tenantSlug, agentId: agent.id });
  }

  const items = agents.data?.pages.flatMap((page) => page.items) ?? [];
  return (
    <>
      <section className="panel" aria-labelledby="new-agent-heading">
        <h2 id="new-agent-heading">New agent</h2>
        <form ref={formRef} className="form-row" onSubmit={onCreate} aria-label="Create agent">
          <label>
            Name
            <input name="name" required maxLength={64} placeholder="researcher" />
          </label>
          <label>
            Description
            <input name="description" maxLength={2000} placeholder="What it is for" />
          </label>
          <label>
            Provider
            <input name="provider" maxLength={50} defaultValue={DEFAULT_PROVIDER} />
          </label>
          <label>
            Model
            <input name="model" required maxLength={200} placeholder="gpt-4o-mini" />
          </label>
          <label>
            Base URL
            <input name="baseUrl" placeholder="https://api.example.com/v1" />
          </label>
          <label>
            API key
            <input name="apiKey" type="password" autoComplete="new-password" maxLength={4096} />
          </label>
          <label>
            Isolation
            <select name="isolationPolicy" defaultValue="">
              {ISOLATION_OPTIONS.map((option) => (
                <option key={option.value} value={option.value}>
                  {option.label}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" disabled={create.isPending}>
            {create.isPending ? "Creating…" : "Create agent"}
          </button>
        </form>
        <ServerErrors error={create.error} />
        {created && (
          <div className="alert success" role="status" style={{ marginTop: 12 }}>
            Agent <strong>{created}</strong> created.
          </div>
        )}
      </section>

      <section className="panel" aria-labelledby="agents-heading">
        <h2 id="agents-heading">Agents</h2>
        {agents.error ? (
          <div className="alert error" role="alert">
            {agents.error.message}
          </div>
        ) : !agents.data ? (
          <p className="muted">Loading…</p>
        ) : items.length === 0 ? (
          <p className="muted">No agents yet. Create one above.</p>
        ) : (
          <table className="data">
            <thead>
              <tr>
                <th>Name</th>
                <th>Model</th>
                <th>Isolation</th>
                <th>Key</th>
                <th>Created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {items.map((agent) => (
                <tr key={agent.id} data-testid="agent-row">
                  <td>
                    <Link
                      href={`/t/${encodeURIComponent(tenantSlug)}/agents/${encodeURIComponent(agent.id)}`}
                    >
                      {agent.name}
                    </Link>
                    {agent.description && <div className="muted">{agent.description}</div>}
                  </td>
                  <td>
                    <span className="mono" data-testid="agent-model">
                      {agent.modelConfig.model}
                    </span>
                    <div className="muted">{agent.modelConfig.provider}</div>
                  </td>
                  <td>{isolationLabel(agent.isolationPolicy)}</td>
                  <td>
                    <KeyBadge hasApiKey={agent.hasApiKey} />
                  </td>
                  <td>{agent.createdAt.toLocaleString()}</td>
                  <td>
                    <button
                      type="button"
                      className="danger"
                      disabled={remove.isPending}
                      onClick={() => onDelete(agent)}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <LoadMore query={agents} />
        <ServerErrors error={remove.error} />
      </section>
    </>
  );
}
