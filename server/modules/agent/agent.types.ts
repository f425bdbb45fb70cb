import { z } from "zod";
import { ZWorkspaceEnv } from "@/server/workspace/workspace-env";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { ZSeedSkill } from "@/server/workspace/skills/agent-seed";
import { ZBackendKind } from "@/server/workspace/drivers/kind";

const ISOLATION_POLICIES = ["PER_AGENT", "PER_SESSION", "PER_USER"] as const;
export const ZIsolationPolicy = z.enum(ISOLATION_POLICIES);
export type IsolationPolicy = z.infer<typeof ZIsolationPolicy>;

/** The backends a workspace can be on (which of them this installation runs is checked by the engine). */
export { ZBackendKind };

/**
 * Media types a model may be declared to accept as input: what the Read tool can hand over (images,
 * PDFs) and OpenAI-style chat APIs take as image or file parts. Nothing else is accepted, so a typo is a
 * 400 rather than a silently ignored setting.
 */
const MODEL_INPUT_MEDIA_TYPES = [
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "application/pdf",
] as const;
const ZModelInputMediaTypes = z
  .array(z.enum(MODEL_INPUT_MEDIA_TYPES))
  .max(MODEL_INPUT_MEDIA_TYPES.length)
  .refine((types) => new Set(types).size === types.length, "each media type once")
  .describe(
    "Media types the model accepts as input (vision: image/png, image/jpeg, image/gif, image/webp; " +
      "documents: application/pdf). The Read tool attaches such files for the model; absent: none.",
  );

/**
 * The model an agent talks to. The provider API key is NOT part of it: it is passed separately
 * (`modelApiKey`) and stored encrypted. Known keys only, each bounded: what the API accepts is strict
 * (unknown keys are a 400, see agent.schema.ts); rows stored before that may hold extra keys, which this
 * read shape drops instead of failing on.
 */
const MODEL_CONFIG_FIELDS = {
  provider: z.string().min(1).max(50),
  model: z.string().min(1).max(200),
  baseUrl: z.url().max(2048).optional(),
  temperature: z.number().min(0).max(2).optional(),
  maxOutputTokens: z.number().int().positive().max(10_000_000).optional(),
  acceptedMediaTypes: ZModelInputMediaTypes.optional(),
};
export const ZAgentModelConfig = z.object(MODEL_CONFIG_FIELDS);
export type AgentModelConfig = z.infer<typeof ZAgentModelConfig>;

/** Names must be unique within a list: they are what scopes and partitions key on. */
function uniqueNames<T extends { name: string }>(items: T[], ctx: z.RefinementCtx): void {
  const seen = new Set<string>();
  items.forEach((item, index) => {
    if (seen.has(item.name))
      ctx.addIssue({ code: "custom", path: [index, "name"], message: `duplicate name '${item.name}'` });
    seen.add(item.name);
  });
}

/**
 * The agent's default MCPs (the reference's `default_mcps`, in the `.mcp` v2 declaration shape): every MCP
 * scope of the agent that never added or removed an MCP starts with them, in each of its workspaces.
 */
export const ZAgentDefaultMcps = z.array(ZMcpDeclaration).max(100).superRefine(uniqueNames);

/**
 * The agent's default skills (the reference's seed `skill_paths`, inline: see ZSeedSkill), seeded once into
 * the agent's skill partition of each workspace it uses.
 */
export const ZAgentDefaultSkills = z.array(ZSeedSkill).max(100).superRefine(uniqueNames);

export const ZAgentName = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9 _.-]*$/, "letters, digits, spaces, dots, dashes and underscores");

/**
 * The agent's system prompt (the reference's `sys_prompt`): sent as written, followed by what the workspace
 * adds (skills, offload instructions). Empty: `defaultSystemPrompt(name)`. The description is not part of it.
 */
export const ZAgentSystemPrompt = z.string().max(100_000);

/** What an agent with an empty system prompt is told (what every agent was told before it had one). */
export function defaultSystemPrompt(agentName: string): string {
  return `You are ${agentName}, an AI agent working in a persistent workspace.`;
}

export const ZCreateAgentInput = z.object({
  name: ZAgentName,
  description: z.string().max(2000).default(""),
  systemPrompt: ZAgentSystemPrompt.default(""),
  modelConfig: ZAgentModelConfig,
  /** Plain provider key; encrypted before it reaches the database, never returned. */
  modelApiKey: z.string().min(1).max(4096).nullish(),
  defaultMcpConfigs: ZAgentDefaultMcps.default([]),
  defaultSkills: ZAgentDefaultSkills.default([]),
  env: ZWorkspaceEnv.default({}),
  isolationPolicy: ZIsolationPolicy.nullish(),
  backend: ZBackendKind.nullish(),
  /** Team workers only (set by the team tools, never by the API): the leader session that created it. */
  createdByLeaderSessionId: z.string().min(1).max(200).nullish(),
  /** `scopedCreateKey` of the request's idempotency key: unique per tenant. */
  createKey: z.string().min(1).max(400).nullish(),
});
export type TCreateAgentInput = z.input<typeof ZCreateAgentInput>;

/**
 * A change to the stored model settings, merged key by key: an absent field keeps its stored value, null
 * removes an optional one (baseUrl, temperature, maxOutputTokens, acceptedMediaTypes). Provider and model can be changed but not
 * removed. Unknown keys are refused. The provider key is never part of it (see `modelApiKey`).
 */
export const ZAgentModelConfigPatch = z.strictObject({
  provider: MODEL_CONFIG_FIELDS.provider.optional(),
  model: MODEL_CONFIG_FIELDS.model.optional(),
  baseUrl: z.url().max(2048).nullish(),
  temperature: MODEL_CONFIG_FIELDS.temperature.unwrap().nullish(),
  maxOutputTokens: MODEL_CONFIG_FIELDS.maxOutputTokens.unwrap().nullish(),
  acceptedMediaTypes: ZModelInputMediaTypes.nullish(),
});
export type AgentModelConfigPatch = z.infer<typeof ZAgentModelConfigPatch>;

/**
 * Omitted fields stay as they are; `modelConfig` is merged into the stored settings (see
 * ZAgentModelConfigPatch); `modelApiKey`: a string replaces the stored key, null removes it, absent keeps it.
 */
export const ZUpdateAgentInput = z.object({
  name: ZAgentName.optional(),
  description: z.string().max(2000).optional(),
  systemPrompt: ZAgentSystemPrompt.optional(),
  modelConfig: ZAgentModelConfigPatch.optional(),
  modelApiKey: z.string().min(1).max(4096).nullish(),
  defaultMcpConfigs: ZAgentDefaultMcps.optional(),
  defaultSkills: ZAgentDefaultSkills.optional(),
  env: ZWorkspaceEnv.optional(),
  isolationPolicy: ZIsolationPolicy.nullish(),
  backend: ZBackendKind.nullish(),
});
export type TUpdateAgentInput = z.input<typeof ZUpdateAgentInput>;

export const ZAgentDTO = z.object({
  id: z.string(),
  name: z.string(),
  /** A short human description (lists, team leaders' invite tool). */
  description: z.string(),
  /** Sent to the model as the system prompt ("" → defaultSystemPrompt(name)). */
  systemPrompt: z.string(),
  modelConfig: ZAgentModelConfig,
  /** Whether a provider key is stored (the key itself never leaves the server). */
  hasModelApiKey: z.boolean(),
  defaultMcpConfigs: z.array(z.unknown()),
  defaultSkills: z.array(z.unknown()),
  /** Environment variables of its sessions' commands (not secret: shown as stored). */
  env: ZWorkspaceEnv,
  isolationPolicy: ZIsolationPolicy.nullable(),
  /** The backend of the agent's new workspaces; null: the tenant's default. */
  backend: ZBackendKind.nullable(),
  createdByUserId: z.string().nullable(),
  /** Set for a team worker made by `AgentCreate`; it is deleted with that leader session. */
  createdByLeaderSessionId: z.string().nullable(),
  createdAt: z.date(),
  updatedAt: z.date(),
});
export type AgentDTO = z.infer<typeof ZAgentDTO>;
