import type { BerthClient } from "@/server/client/create-berth-client";
import type { TChatTurnEvent } from "@/server/modules/chat/chat.schema";

/**
 * Runs one chat turn through the typed client and resolves with its events once it ends: the one place the
 * e2e tests depend on how `chat.send` is transported.
 */
export function sendChatTurn(
  client: BerthClient,
  input: { tenantId: string; sessionId: string; message: string },
): Promise<TChatTurnEvent[]> {
  return new Promise((resolve, reject) => {
    const events: TChatTurnEvent[] = [];
    const subscription = client.chat.send.subscribe(input, {
      onData: (event) => {
        events.push(event);
        // The server ends the stream after `done`; stop listening there rather than wait for a reconnect.
        if (event.type === "done") {
          subscription.unsubscribe();
          resolve(events);
        }
      },
      onError: (error) => {
        subscription.unsubscribe();
        reject(error instanceof Error ? error : new Error(String(error)));
      },
      onComplete: () => resolve(events),
    });
  });
}
