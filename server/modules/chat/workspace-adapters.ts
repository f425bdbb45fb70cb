import type { OffloaderPort } from "./ports";

/**
 * Thin adapters from the workspace engine's real APIs to the chat ports, so the agent loop stays
 * independent of the engine's shapes.
 */

/** The part of the engine's `Offloader` (server/workspace/offload/offloader.ts) the chat service uses. */
export type EngineOffloader = {
  offloadContext(sessionId: string, messages: readonly object[]): Promise<string>;
  offloadToolResult(sessionId: string, toolCallId: string, output: string): Promise<string>;
};

export function offloaderPort(engine: EngineOffloader): OffloaderPort {
  return {
    offloadToolResult: (sessionId, toolCallId, text) =>
      engine.offloadToolResult(sessionId, safeFileSegment(toolCallId), text),
    offloadContext: (sessionId, messages) => engine.offloadContext(sessionId, messages),
  };
}

/**
 * Tool call ids come from the provider. The engine accepts only `[A-Za-z0-9_.-]` in file names (and no
 * `..`), so anything else is replaced; the engine's `(n)` suffixes keep replaced ids unique.
 */
export function safeFileSegment(id: string): string {
  const safe = id
    .replace(/[^A-Za-z0-9_.-]/g, "_")
    .replace(/\.{2,}/g, "_")
    .replace(/^[^A-Za-z0-9_]/, "_");
  return safe === "" ? "call" : safe.slice(0, 128);
}
