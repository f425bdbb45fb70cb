import type { Db } from "@/server/db";
import { generateText } from "ai";
import { z } from "zod";
import type { SecretKey } from "@/server/auth/secrets";
import type { TenantScope } from "@/server/auth/scope";
import { assertCan } from "@/server/auth/policy";
import { getAgent, getAgentModelApiKey } from "@/server/modules/agent/agent.data";
import { APP_ERROR_CODES, type AppErrorCode } from "@/server/shared/errors";
import { createAgentModel, modelEndpointForAgent } from "@/server/agent/model-provider";
import { toModelAppError } from "@/server/agent/model-errors";

const ZAppErrorCode = z.enum(Object.keys(APP_ERROR_CODES) as [AppErrorCode, ...AppErrorCode[]]);

/** The answer of a connection check: reachable and accepted, or why not (safe to show). */
export const ZModelCheckResult = z.discriminatedUnion("ok", [
  z.object({
    ok: z.literal(true),
    model: z.string(),
    baseUrl: z.string(),
    latencyMs: z.number().int().nonnegative(),
  }),
  z.object({
    ok: z.literal(false),
    model: z.string(),
    baseUrl: z.string().nullable(),
    code: ZAppErrorCode,
    message: z.string(),
  }),
]);
export type TModelCheckResult = z.infer<typeof ZModelCheckResult>;

/** Short, so the button answers quickly even when the endpoint hangs. */
const CHECK_TIMEOUT_MS = 15_000;

/**
 * Checks an agent's model endpoint and key with one tiny completion (a few output tokens, no retries): the
 * same provider, URL, model and key a chat turn uses. A failure is an answer, not an error: `{ ok: false }`
 * with the reason the chat would report (wrong key, unreachable URL, unknown model...).
 */
export async function checkAgentModel(
  scope: TenantScope,
  agentId: string,
  deps: { secretKey: SecretKey; timeoutMs?: number },
  db: Db,
): Promise<TModelCheckResult> {
  assertCan(scope, "agent:manage");
  const agent = await getAgent(scope, agentId, db);
  const model = agent.modelConfig.model;
  let baseUrl: string | null = agent.modelConfig.baseUrl ?? null;
  const started = performance.now();
  try {
    const endpoint = modelEndpointForAgent(
      agent.modelConfig,
      await getAgentModelApiKey(scope, agent.id, deps.secretKey, db),
    );
    baseUrl = endpoint.baseUrl;
    const agentModel = createAgentModel(endpoint);
    await generateText({
      model: agentModel.model,
      prompt: "Reply with the single word OK.",
      maxOutputTokens: 5,
      maxRetries: 0,
      abortSignal: AbortSignal.timeout(deps.timeoutMs ?? CHECK_TIMEOUT_MS),
    });
    return { ok: true, model, baseUrl, latencyMs: Math.round(performance.now() - started) };
  } catch (thrown) {
    if (thrown instanceof Error && thrown.name === "TimeoutError") {
      const seconds = Math.round((deps.timeoutMs ?? CHECK_TIMEOUT_MS) / 1000);
      return {
        ok: false,
        model,
        baseUrl,
        code: "TIMEOUT",
        message: `The model endpoint did not answer within ${seconds} s.`,
      };
    }
    const error = toModelAppError(thrown);
    return { ok: false, model, baseUrl, code: error.code, message: error.userMessage };
  }
}
