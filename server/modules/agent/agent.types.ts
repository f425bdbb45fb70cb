import { z } from "zod";

export const ISOLATION_POLICIES = ["PER_AGENT", "PER_SESSION", "PER_USER"] as const;
export const ZIsolationPolicy = z.enum(ISOLATION_POLICIES);
export type IsolationPolicy = z.infer<typeof ZIsolationPolicy>;

/**
 * Media types a model may be declared to accept as input: what the Read tool can hand over (images,
 * PDFs) and OpenAI-style chat APIs take as image or file parts. Nothing else is accepted, so a typo is a
 * 400 rather than a silently ignored setting.
 */
export const MODEL_INPUT_MEDIA_TYPES = [
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "application/pdf",
] as const;
export const ZModelInputMediaTypes = z
  .array(z.enum(MODEL_INPUT_MEDIA_TYPES))
  .max(MODEL_INPUT_MEDIA_TYPES.length)
  .refine((types) => new Set(types).size === types.length, "each media type once")
  .describe(
    "Media types the model accepts as input (vision: image/png, image/jpeg, image/gif, image/webp; " +
      "documents: application/pdf). The Read tool attaches such files for the model; absent: none.",
  );

/**
 * The model an agent talks to. The provider API key is NOT part of it: it is passed separately
 * (`modelApiKey`) and stored encrypted.
 */
export const ZAgentModelConfig = z
  .object({
    provider: z.string().min(1).max(50),
    model: z.string().min(1).max(200),
    baseUrl: z.url().optional(),
    temperature: z.number().min(0).max(2).optional(),
    maxOutputTokens: z.number().int().positive().optional(),
    acceptedMediaTypes: ZModelInputMediaTypes.optional(),
  })
  .catchall(z.unknown());
export type AgentModelConfig = z.infer<typeof ZAgentModelConfig>;

export const ZAgentName = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9 _.-]*$/, "letters, digits, spaces, dots, dashes and underscores");

export const ZCreateAgentInput = z.object({
  name: ZAgentName,
  description: z.string().max(2000).default(""),
  modelConfig: ZAgentModelConfig,
  /** Plain provider key; encrypted before it reaches the database, never returned. */
  modelApiKey: z.string().min(1).max(4096).nullish(),
  defaultMcpConfigs: z.array(z.unknown()).default([]),
  defaultSkills: z.array(z.unknown()).default([]),
  isolationPolicy: ZIsolationPolicy.nullish(),
  /** Team workers only (set by the team tools, never by the API): the leader session that created it. */
  createdByLeaderSessionId: z.string().min(1).max(200).nullish(),
});
export type TCreateAgentInput = z.input<typeof ZCreateAgentInput>;

/**
 * A change to the stored model settings, merged key by key: an absent field keeps its stored value, null
 * removes an optional one (baseUrl, temperature, maxOutputTokens or any extra setting). Provider and model
 * can be changed but not removed. The provider key is never part of it (see `modelApiKey`).
 */
export const ZAgentModelConfigPatch = z
  .object({
    provider: z.string().min(1).max(50).optional(),
    model: z.string().min(1).max(200).optional(),
    baseUrl: z.url().nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    maxOutputTokens: z.number().int().positive().nullish(),
    acceptedMediaTypes: ZModelInputMediaTypes.nullish(),
  })
  .catchall(z.unknown());
export type AgentModelConfigPatch = z.infer<typeof ZAgentModelConfigPatch>;

/**
 * Omitted fields stay as they are; `modelConfig` is merged into the stored settings (see
 * ZAgentModelConfigPatch); `modelApiKey`: a string replaces the stored key, null removes it, absent keeps it.
 */
export const ZUpdateAgentInput = z.object({
  name: ZAgentName.optional(),
  description: z.string().max(2000).optional(),
  modelConfig: ZAgentModelConfigPatch.optional(),
  modelApiKey: z.string().min(1).max(4096).nullish(),
  defaultMcpConfigs: z.array(z.unknown()).optional(),
  defaultSkills: z.array(z.unknown()).optional(),
  isolationPolicy: ZIsolationPolicy.nullish(),
});
export type TUpdateAgentInput = z.input<typeof ZUpdateAgentInput>;

export const ZAgentDTO = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  modelConfig: ZAgentModelConfig,
  /** Whether a provider key is stored (the key itself never leaves the server). */
  hasModelApiKey: z.boolean(),
  defaultMcpConfigs: z.array(z.unknown()),
  defaultSkills: z.array(z.unknown()),
  isolationPolicy: ZIsolationPolicy.nullable(),
  createdByUserId: z.string().nullable(),
  /** Set for a team worker made by `AgentCreate`; it is deleted with that leader session. */
  createdByLeaderSessionId: z.string().nullable(),
  createdAt: z.date(),
  updatedAt: z.date(),
});
export type AgentDTO = z.infer<typeof ZAgentDTO>;
