import type { BerthClient } from "@/server/client/create-berth-client";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";

/**
 * Runs one chat turn through the typed client (a streamed POST mutation) and resolves with its events once
 * it ends: the one place the e2e tests depend on how `chat.send` is transported.
 */
export async function sendChatTurn(
  client: BerthClient,
  input: { tenantId: string; sessionId: string; message: string },
): Promise<TChatTurnEvent[]> {
  const events: TChatTurnEvent[] = [];
  for await (const event of await client.chat.send.mutate(input)) events.push(event);
  return events;
}
