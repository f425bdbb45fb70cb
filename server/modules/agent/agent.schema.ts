import { z } from "zod";
import { ZWorkspaceEnv } from "@/server/workspace/workspace-env";
import { ZIdempotencyKey } from "@/server/shared/idempotency";
import { ZPageOf } from "@/server/shared/page";
import {
  ZAgentDefaultMcps,
  ZAgentDefaultSkills,
  ZAgentDTO,
  ZAgentModelConfig,
  ZAgentModelConfigPatch,
  ZAgentName,
  ZBackendKind,
  ZAgentSystemPrompt,
  ZIsolationPolicy,
} from "@/server/modules/agent/agent.types";

/**
 * The public (API) shape of an agent's model settings: any OpenAI-compatible endpoint. `apiKey` is accepted
 * here for convenience and moved out before storage (it is encrypted in its own column, never kept in the
 * JSON config and never returned: responses carry `hasApiKey`).
 */
const ZAgentModelConfigInput = z.strictObject({
  ...ZAgentModelConfig.shape,
  provider: z.string().min(1).max(50).default("openai-compatible"),
  apiKey: z.string().min(1).max(4096).optional(),
});

export const ZAgentCreateRequest = z.object({
  name: ZAgentName,
  /** A short human description; not sent to the model (see systemPrompt). */
  description: z.string().max(2000).optional(),
  /** The system prompt, as sent; empty or absent: "You are <name>, an AI agent working in a persistent workspace." */
  systemPrompt: ZAgentSystemPrompt.optional(),
  modelConfig: ZAgentModelConfigInput,
  /** Same as `modelConfig.apiKey`. */
  modelApiKey: z.string().min(1).max(4096).nullish(),
  defaultMcpConfigs: ZAgentDefaultMcps.optional(),
  defaultSkills: ZAgentDefaultSkills.optional(),
  /** Environment variables of the agent's commands in every session (a session's own override them). */
  env: ZWorkspaceEnv.optional(),
  /** Null/absent: the tenant's default (tenant.policy `defaultIsolationPolicy`, PER_AGENT unless set). */
  isolationPolicy: ZIsolationPolicy.nullish(),
  /** Null/absent: the tenant's default backend (then the installation's). Must be one the installation runs. */
  backend: ZBackendKind.nullish(),
  /** The same key from the same caller within 24 hours returns the first agent instead of creating again. */
  idempotencyKey: ZIdempotencyKey.optional(),
});
export type TAgentCreateRequest = z.input<typeof ZAgentCreateRequest>;

const API_KEY_PATCH_HELP =
  "Provider API key, write-only: a string replaces the stored key, null removes it, absent keeps it. " +
  "Responses never contain it, only `hasApiKey`.";

/** `string` replaces the key, `null` clears it, `undefined` (absent) keeps it. */
const ZApiKeyPatch = z.string().min(1).max(4096).nullable().optional().describe(API_KEY_PATCH_HELP);

/** The API shape of a model-settings change: the stored settings' patch, plus the key for convenience. */
const ZAgentModelConfigPatchRequest = ZAgentModelConfigPatch.extend({ apiKey: ZApiKeyPatch }).describe(
  "Merged into the stored model settings: absent fields keep their values; null removes an optional one " +
    "(baseUrl, temperature, maxOutputTokens); provider and model can be changed, not removed; unknown keys are refused. " +
    "`apiKey`: same as the top-level `modelApiKey`.",
);

/**
 * A partial update: omitted fields stay as they are. The key may be given as `modelApiKey` or
 * `modelConfig.apiKey` (not two different values).
 */
export const ZAgentUpdateRequest = z
  .object({
    name: ZAgentName.optional(),
    description: z.string().max(2000).optional(),
    systemPrompt: ZAgentSystemPrompt.optional(),
    modelConfig: ZAgentModelConfigPatchRequest.optional(),
    modelApiKey: ZApiKeyPatch,
    defaultMcpConfigs: ZAgentDefaultMcps.optional(),
    defaultSkills: ZAgentDefaultSkills.optional(),
    env: ZWorkspaceEnv.optional().describe(
      "Replaces all the agent's environment variables (absent: kept; {} clears them). Its sessions' next commands see them.",
    ),
    isolationPolicy: ZIsolationPolicy.nullish().describe(
      "Null: back to the tenant's default isolation policy.",
    ),
    backend: ZBackendKind.nullish().describe(
      "The backend of the agent's NEW workspaces (existing ones stay where they are). Null: the tenant's default.",
    ),
  })
  .refine(
    (patch) =>
      patch.modelApiKey === undefined ||
      patch.modelConfig?.apiKey === undefined ||
      patch.modelApiKey === patch.modelConfig.apiKey,
    { path: ["modelApiKey"], message: "give the API key once: modelApiKey or modelConfig.apiKey" },
  )
  .describe("Partial update of an agent: omitted fields keep their stored values.");
export type TAgentUpdateRequest = z.input<typeof ZAgentUpdateRequest>;

/** What the API returns for an agent: never the key (nor its ciphertext), only whether one is stored. */
export const ZAgentView = ZAgentDTO.extend({ hasApiKey: z.boolean() });
export type AgentView = z.infer<typeof ZAgentView>;
export const ZAgentViewPage = ZPageOf(ZAgentView);
