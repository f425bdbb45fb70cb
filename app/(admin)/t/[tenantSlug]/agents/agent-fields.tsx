"use client";

import { useQuery } from "@tanstack/react-query";
import { Field } from "@/app/_components/ui/field";
import { Input } from "@/app/_components/ui/input";
import { Select } from "@/app/_components/ui/select";
import { Textarea } from "@/app/_components/ui/textarea";
import { useTRPC } from "@/app/_trpc/client";
import type { AgentView } from "@/server/modules/agent/agent.schema";
import { EnvEditor, type EnvRow } from "../_components/env-editor";
import { AgentDefaultsEditor } from "./agent-defaults-editor";
import { type AgentDefaultsValue, DEFAULT_PROVIDER } from "./agent-form";
import { ISOLATION_HELP, ISOLATION_POLICIES, isolationLabel } from "./agent-ui";

/**
 * The fields of an agent, one set for the create form and the editor (read back by readAgentFields):
 * identity and what the model is told (description for people, system prompt for the model), the model
 * endpoint and its parameters, the isolation policy (the tenant's default named), and the defaults its
 * workspaces start with, and its commands' environment variables. `agent` fills them from a stored agent; without it they start empty. The API key is
 * only part of the create form: the editor replaces it in a card of its own.
 */
export function AgentFields({
  tenantSlug,
  agent,
  defaults,
  onDefaultsChange,
  env,
  onEnvChange,
  readOnly = false,
}: {
  tenantSlug: string;
  agent?: AgentView;
  defaults: AgentDefaultsValue;
  onDefaultsChange: (next: AgentDefaultsValue) => void;
  env: readonly EnvRow[];
  onEnvChange: (next: EnvRow[]) => void;
  readOnly?: boolean;
}) {
  const trpc = useTRPC();
  const policy = useQuery(trpc.tenant.policy.queryOptions({ tenantSlug }));
  const tenantDefault = policy.data?.effective.isolationPolicy;
  const backends = useQuery(trpc.workspace.backends.queryOptions({ tenantSlug }));
  const defaultBackend = backends.data?.tenantDefault ?? backends.data?.installationDefault;
  const config = agent?.modelConfig;
  return (
    <>
      <Field label="Name">
        <Input name="name" required maxLength={64} placeholder="researcher" defaultValue={agent?.name} />
      </Field>
      <Field label="Model">
        <Input name="model" required maxLength={200} placeholder="gpt-4o-mini" defaultValue={config?.model} />
      </Field>
      <Field
        label="Description"
        hint="What it is for, in a line: shown to people and to team leaders, not sent as its prompt."
        className="sm:col-span-2"
      >
        <Textarea
          name="description"
          maxLength={2000}
          rows={2}
          placeholder="Researches a topic and writes notes"
          defaultValue={agent?.description}
        />
      </Field>
      <Field
        label="System prompt"
        hint={`Sent to the model first, as written. Empty: "You are ${agent?.name ?? "<name>"}, an AI agent working in a persistent workspace." The workspace's tool and skill instructions follow it either way.`}
        className="sm:col-span-2"
      >
        <Textarea
          name="systemPrompt"
          maxLength={100_000}
          rows={6}
          className="font-mono text-xs"
          placeholder={"You are a careful researcher.\nCite your sources and write notes to NOTES.md."}
          defaultValue={agent?.systemPrompt}
        />
      </Field>
      <Field label="Provider">
        <Input name="provider" required maxLength={50} defaultValue={config?.provider ?? DEFAULT_PROVIDER} />
      </Field>
      <Field label="Base URL">
        <Input name="baseUrl" placeholder="https://api.example.com/v1" defaultValue={config?.baseUrl ?? ""} />
      </Field>
      {!agent && (
        <Field label="API key" hint="Write-only: never shown again.">
          <Input name="apiKey" type="password" autoComplete="new-password" maxLength={4096} />
        </Field>
      )}
      <Field label="Temperature" hint="0–2; empty: the provider's default. Lower is more focused.">
        <Input
          name="temperature"
          type="number"
          step="0.1"
          min={0}
          max={2}
          defaultValue={config?.temperature ?? ""}
        />
      </Field>
      <Field label="Max output tokens" hint="Per model call; empty: the provider's default.">
        <Input
          name="maxOutputTokens"
          type="number"
          min={1}
          step={1}
          defaultValue={config?.maxOutputTokens ?? ""}
        />
      </Field>
      <Field
        label="Backend"
        hint="Where this agent's NEW workspaces run (existing ones stay where they are), among the backends this installation runs."
      >
        <Select name="backend" defaultValue={agent?.backend ?? ""}>
          <option value="">Tenant default{defaultBackend ? ` (${defaultBackend})` : ""}</option>
          {(backends.data?.available ?? []).map((option) => (
            <option key={option.kind} value={option.kind}>
              {option.label} — {option.summary}
            </option>
          ))}
        </Select>
      </Field>
      <Field label="Isolation" hint={ISOLATION_HELP}>
        <Select name="isolationPolicy" defaultValue={agent?.isolationPolicy ?? ""}>
          <option value="">Tenant default{tenantDefault ? ` (${isolationLabel(tenantDefault)})` : ""}</option>
          {ISOLATION_POLICIES.map((value) => (
            <option key={value} value={value}>
              {isolationLabel(value)}
            </option>
          ))}
        </Select>
      </Field>
      <div className="sm:col-span-2">
        <AgentDefaultsEditor
          tenantSlug={tenantSlug}
          {...(agent ? { agentId: agent.id } : {})}
          value={defaults}
          onChange={onDefaultsChange}
          readOnly={readOnly}
        />
      </div>
      <section
        className="grid gap-3 rounded-lg border p-4 sm:col-span-2"
        aria-labelledby="agent-env-heading"
        data-testid="agent-env"
      >
        <h3 id="agent-env-heading" className="text-sm font-medium">
          Environment variables
        </h3>
        <EnvEditor
          rows={env}
          onChange={onEnvChange}
          readOnly={readOnly}
          help="Set in every session's commands (a session's own variable of the same name wins). Visible to anyone who can read this agent: plain configuration, not for secrets."
        />
      </section>
    </>
  );
}
