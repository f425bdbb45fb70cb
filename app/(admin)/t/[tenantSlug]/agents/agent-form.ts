import type {
  AgentView,
  TAgentCreateRequest,
  TAgentUpdateRequest,
} from "@/server/modules/agent/agent.schema";
import type { AgentDTO, IsolationPolicy } from "@/server/modules/agent/agent.types";

// Types only: this file is in the browser bundle, and agent.types pulls in server code.
type BackendKind = NonNullable<AgentDTO["backend"]>;
import type { TMcpDeclaration } from "@/server/workspace/mcp/types";
import type { SeedSkill } from "@/server/workspace/skills/agent-seed";
import type { WorkspaceEnv } from "@/server/workspace/workspace-env";
import { formText, parseIsolation } from "./agent-ui";

/** What the agent's workspaces start with: its default MCP servers and skills (edited as a whole). */
export type AgentDefaultsValue = { mcps: TMcpDeclaration[]; skills: SeedSkill[] };

export const DEFAULT_PROVIDER = "openai-compatible";

/** The stored defaults as the editor holds them (the API returns them as opaque JSON). */
export function defaultsOf(agent: AgentView): AgentDefaultsValue {
  return {
    mcps: agent.defaultMcpConfigs as TMcpDeclaration[],
    skills: agent.defaultSkills as SeedSkill[],
  };
}

/** The shared field set's values (see AgentFields), read from its form. */
export type AgentFieldValues = {
  name: string;
  description: string;
  systemPrompt: string;
  provider: string;
  model: string;
  baseUrl: string;
  apiKey: string;
  temperature: number | null;
  maxOutputTokens: number | null;
  isolationPolicy: IsolationPolicy | null;
  /** The backend of the agent's new workspaces; null: the tenant's default. */
  backend: BackendKind | null;
};

/** "" → null (no setting); anything else as a number (the server validates the range). */
const optionalNumber = (text: string): number | null => (text === "" ? null : Number(text));

export function readAgentFields(form: FormData): AgentFieldValues {
  return {
    name: formText(form, "name"),
    description: formText(form, "description"),
    systemPrompt: formText(form, "systemPrompt"),
    provider: formText(form, "provider"),
    model: formText(form, "model"),
    baseUrl: formText(form, "baseUrl"),
    apiKey: formText(form, "apiKey"),
    temperature: optionalNumber(formText(form, "temperature")),
    maxOutputTokens: optionalNumber(formText(form, "maxOutputTokens")),
    isolationPolicy: parseIsolation(form.get("isolationPolicy")),
    backend: parseBackend(form.get("backend")),
  };
}

/** `agent.create`'s input: unset optional settings are left out, so the server's defaults apply. */
export function createRequestOf(
  values: AgentFieldValues,
  defaults: AgentDefaultsValue,
  env: WorkspaceEnv,
): Omit<TAgentCreateRequest, "tenantSlug"> {
  return {
    name: values.name,
    description: values.description,
    systemPrompt: values.systemPrompt,
    modelConfig: {
      provider: values.provider || DEFAULT_PROVIDER,
      model: values.model,
      ...(values.baseUrl ? { baseUrl: values.baseUrl } : {}),
      ...(values.temperature !== null ? { temperature: values.temperature } : {}),
      ...(values.maxOutputTokens !== null ? { maxOutputTokens: values.maxOutputTokens } : {}),
    },
    ...(values.apiKey ? { modelApiKey: values.apiKey } : {}),
    defaultMcpConfigs: defaults.mcps,
    defaultSkills: defaults.skills,
    ...(Object.keys(env).length > 0 ? { env } : {}),
    isolationPolicy: values.isolationPolicy,
    ...(values.backend ? { backend: values.backend } : {}),
  };
}

/**
 * "" (the tenant's default) → null; the select offers the installation's kinds (workspace.backends), and a
 * kind the server does not run is refused there with its reason.
 */
function parseBackend(value: FormDataEntryValue | null): BackendKind | null {
  return typeof value === "string" && value !== "" ? value : null;
}

/** JSON with object keys sorted: stored defaults come back from Postgres (jsonb) with their keys reordered. */
function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item && typeof item === "object" && !Array.isArray(item)
      ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : item,
  );
}

/** Whether two defaults (or a default and a library entry) are the same content, whatever the key order. */
export const sameContent = (a: unknown, b: unknown) => stableJson(a) === stableJson(b);

/** Only what differs from the stored agent: the update is a partial patch, absent fields stay as stored. */
export function settingsPatchOf(
  agent: AgentView,
  values: AgentFieldValues,
  defaults: AgentDefaultsValue,
  env: WorkspaceEnv,
): TAgentUpdateRequest {
  const patch: TAgentUpdateRequest = {};
  const modelConfig: NonNullable<TAgentUpdateRequest["modelConfig"]> = {};
  if (values.name !== agent.name) patch.name = values.name;
  if (values.description !== agent.description) patch.description = values.description;
  if (values.systemPrompt !== agent.systemPrompt.trim()) patch.systemPrompt = values.systemPrompt;
  if (values.provider !== agent.modelConfig.provider) modelConfig.provider = values.provider;
  if (values.model !== agent.modelConfig.model) modelConfig.model = values.model;
  // An emptied base URL removes the stored one (null), as the patch schema defines.
  if (values.baseUrl !== (agent.modelConfig.baseUrl ?? "")) modelConfig.baseUrl = values.baseUrl || null;
  if (values.temperature !== (agent.modelConfig.temperature ?? null))
    modelConfig.temperature = values.temperature;
  if (values.maxOutputTokens !== (agent.modelConfig.maxOutputTokens ?? null))
    modelConfig.maxOutputTokens = values.maxOutputTokens;
  if (Object.keys(modelConfig).length > 0) patch.modelConfig = modelConfig;
  if (values.isolationPolicy !== agent.isolationPolicy) patch.isolationPolicy = values.isolationPolicy;
  if (values.backend !== agent.backend) patch.backend = values.backend;
  // The lists go whole, and only when they changed (a stdio default is checked against the tenant's policy).
  if (!sameContent(defaults.mcps, agent.defaultMcpConfigs)) patch.defaultMcpConfigs = defaults.mcps;
  if (!sameContent(defaults.skills, agent.defaultSkills)) patch.defaultSkills = defaults.skills;
  // The map replaces the stored one whole: sent only when it changed, so a save elsewhere keeps it.
  if (!sameContent(env, agent.env)) patch.env = env;
  return patch;
}
