/**
 * The typed client's public entry (what the `berth-client` package exports once built, see
 * server/client/README.md): `createBerthClient`, `chat.run`'s types, and the router type for projects that
 * build their own links.
 */
export {
  createBerthClient,
  resolveTrpcEndpoint,
  type BerthClient,
  type BerthClientOptions,
} from "./create-berth-client";
export {
  runChatTurn,
  type ChatRunInput,
  type ChatRunOptions,
  type ChatRunResult,
  type ChatRunToolCall,
} from "./chat-run";
export type { TChatTurnEvent, TTurnUsage, TTurnStatus } from "@/server/agent/agent.schema";
export { isRetryableError } from "./retryable";
export type { AppRouter } from "@/server/api/root";
export { TRPCClientError } from "@trpc/client";
