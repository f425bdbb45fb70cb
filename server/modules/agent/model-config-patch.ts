import { isDeepStrictEqual } from "node:util";
import {
  type AgentModelConfig,
  type AgentModelConfigPatch,
  ZAgentModelConfig,
} from "@/server/modules/agent/agent.types";
import { parseInput } from "@/server/shared/parse-input";

/**
 * Applies a model-settings patch to the stored settings: absent keys stay, null removes a key, anything
 * else replaces it. Returns the merged settings and the names of the keys whose value actually changed
 * (for the audit log: names only, never values). An `apiKey` key is dropped: the key lives in its own
 * encrypted column and must never land in the plain JSON config.
 */
export function mergeModelConfig(
  stored: AgentModelConfig,
  patch: AgentModelConfigPatch,
): { merged: AgentModelConfig; changed: string[] } {
  const merged: Record<string, unknown> = { ...stored };
  const changed: string[] = [];
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined || key === "apiKey") continue;
    if (value === null) {
      if (key in merged) {
        delete merged[key];
        changed.push(key);
      }
      continue;
    }
    if (!isDeepStrictEqual(merged[key], value)) {
      merged[key] = value;
      changed.push(key);
    }
  }
  return { merged: parseInput(ZAgentModelConfig, merged), changed };
}
