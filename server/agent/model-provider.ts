import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";
import { z } from "zod";
import { AppError } from "@/server/shared/errors";

/**
 * The endpoint a turn talks to: any OpenAI-compatible server. The API key arrives decrypted from the agent
 * record and lives only inside the provider's closure; nothing here logs or returns it.
 */
const ZModelEndpoint = z.object({
  /** e.g. `https://api.openai.com/v1`; the provider appends `/chat/completions`. */
  baseUrl: z.url({ protocol: /^https?$/ }),
  /** Empty for local servers that take no key (no Authorization header is sent then). */
  apiKey: z.string(),
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).optional(),
  maxOutputTokens: z.number().int().positive().optional(),
});

export type TModelEndpoint = z.infer<typeof ZModelEndpoint>;

/** Call settings that travel with the model into every `streamText` call of a turn. */
export type ModelCallSettings = { temperature?: number; maxOutputTokens?: number };

export type AgentModel = {
  model: LanguageModel;
  settings: ModelCallSettings;
  /** Safe to log: no key. */
  description: { baseUrl: string; model: string };
};

export function createAgentModel(config: TModelEndpoint): AgentModel {
  const parsed = ZModelEndpoint.parse(config);
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
export function redactModelEndpoint(
  config: TModelEndpoint,
): Omit<TModelEndpoint, "apiKey"> & { hasApiKey: boolean } {
  const { apiKey, ...rest } = config;
  return { ...rest, hasApiKey: apiKey !== "" };
}

/** Base URLs of providers an agent may name without one. Anything else needs `baseUrl`. */
const KNOWN_PROVIDER_BASE_URLS: Readonly<Record<string, string>> = {
  openai: "https://api.openai.com/v1",
};

/**
 * The endpoint of an agent record: its stored model config (`{ provider, model, baseUrl?, temperature?,
 * maxOutputTokens? }`, see server/modules/agent/agent.types.ts) plus its decrypted key (null: none stored).
 */
export function modelEndpointForAgent(
  modelConfig: {
    provider: string;
    model: string;
    baseUrl?: string;
    temperature?: number;
    maxOutputTokens?: number;
  },
  apiKey: string | null,
): TModelEndpoint {
  const baseUrl = modelConfig.baseUrl ?? KNOWN_PROVIDER_BASE_URLS[modelConfig.provider];
  if (!baseUrl) {
    throw new AppError(
      "UNPROCESSABLE",
      `Agent model config for provider ${modelConfig.provider} has no baseUrl`,
      {
        userMessage: `The agent's model settings need a base URL for provider "${modelConfig.provider}".`,
      },
    );
  }
  return {
    baseUrl,
    apiKey: apiKey ?? "",
    model: modelConfig.model,
    ...(modelConfig.temperature === undefined ? {} : { temperature: modelConfig.temperature }),
    ...(modelConfig.maxOutputTokens === undefined ? {} : { maxOutputTokens: modelConfig.maxOutputTokens }),
  };
}
