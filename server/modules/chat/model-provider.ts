import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";
import { z } from "zod";

/**
 * An agent's model configuration: any OpenAI-compatible endpoint. The API key arrives decrypted from the
 * agent record and lives only inside the provider's closure; nothing here logs or returns it.
 */
export const ZAgentModelConfig = z.object({
  /** e.g. `https://api.openai.com/v1`; the provider appends `/chat/completions`. */
  baseUrl: z.url({ protocol: /^https?$/ }),
  /** Empty for local servers that take no key (no Authorization header is sent then). */
  apiKey: z.string(),
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).optional(),
  maxOutputTokens: z.number().int().positive().optional(),
});

export type TAgentModelConfig = z.infer<typeof ZAgentModelConfig>;

/** Call settings that travel with the model into every `streamText` call of a turn. */
export type ModelCallSettings = { temperature?: number; maxOutputTokens?: number };

export type AgentModel = {
  model: LanguageModel;
  settings: ModelCallSettings;
  /** Safe to log: no key. */
  description: { baseUrl: string; model: string };
};

export function createAgentModel(config: TAgentModelConfig): AgentModel {
  const parsed = ZAgentModelConfig.parse(config);
  const provider = createOpenAICompatible({
    name: "agent",
    baseURL: parsed.baseUrl.replace(/\/+$/, ""),
    ...(parsed.apiKey === "" ? {} : { apiKey: parsed.apiKey }),
    // Without it OpenAI-compatible servers send no usage in streams, and `done` would report zeros.
    includeUsage: true,
  });
  const settings: ModelCallSettings = {};
  if (parsed.temperature !== undefined) settings.temperature = parsed.temperature;
  if (parsed.maxOutputTokens !== undefined) settings.maxOutputTokens = parsed.maxOutputTokens;
  return {
    model: provider.chatModel(parsed.model),
    settings,
    description: { baseUrl: parsed.baseUrl, model: parsed.model },
  };
}

/** A config for logs and API responses: the key replaced by whether one is set. */
export function redactModelConfig(
  config: TAgentModelConfig,
): Omit<TAgentModelConfig, "apiKey"> & { hasApiKey: boolean } {
  const { apiKey, ...rest } = config;
  return { ...rest, hasApiKey: apiKey !== "" };
}
