import { z } from "zod";
import { ZAgentModelConfig, ZAgentName, ZIsolationPolicy } from "@/server/modules/agent/agent.types";

/**
 * The public (API) shape of an agent's model settings: any OpenAI-compatible endpoint. `apiKey` is accepted
 * here for convenience and moved out before storage (it is encrypted in its own column, never kept in the
 * JSON config and never returned: responses carry `hasApiKey`).
 */
export const ZAgentModelConfigInput = ZAgentModelConfig.extend({
  provider: z.string().min(1).max(50).default("openai-compatible"),
  apiKey: z.string().min(1).max(4096).optional(),
});

export const ZAgentCreateRequest = z.object({
  name: ZAgentName,
  description: z.string().max(2000).optional(),
  modelConfig: ZAgentModelConfigInput,
  /** Same as `modelConfig.apiKey`. */
  modelApiKey: z.string().min(1).max(4096).nullish(),
  defaultMcpConfigs: z.array(z.unknown()).max(100).optional(),
  defaultSkills: z.array(z.unknown()).max(100).optional(),
  /** Null/absent: the tenant's default (PER_AGENT). */
  isolationPolicy: ZIsolationPolicy.nullish(),
});
export type TAgentCreateRequest = z.input<typeof ZAgentCreateRequest>;

/** Omitted fields stay; `modelApiKey: null` removes the stored key. */
export const ZAgentUpdateRequest = ZAgentCreateRequest.partial();
export type TAgentUpdateRequest = z.input<typeof ZAgentUpdateRequest>;
