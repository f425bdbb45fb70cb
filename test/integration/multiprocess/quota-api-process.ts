/**
 * A web replica for the multi-process quota tests: the process-wide composition a Next.js server builds
 * (getApiComposition → the app router over getAgentServices() and getEngine()), called in-process through
 * the tRPC caller as the tenant's owner. Prints "ready"; then each stdin line `send <sessionId>…` starts one
 * `chat.send` per session id at once, and each turn prints one JSON line (a TurnOutcome) when it ended.
 */
import { createInterface } from "node:readline";
import { getApiComposition } from "@/server/api/composition";
import { createContextInner } from "@/server/api/context";
import { createCaller } from "@/server/api/root";
import { closeAgentServices, getEngine } from "@/server/composition/services";
import { disconnectDb } from "@/server/db";
import type { TChatTurnEvent } from "@/server/modules/chat/chat.schema";
import { getQueues } from "@/server/queue/queues";
import { ownerPrincipalFromEnv } from "./processes";

export type TurnOutcome = {
  sessionId: string;
  /** The `done` event's status; null when the call was refused before the turn started. */
  status: string | null;
  /** `chat.send` rejected: the AppError code and details (QUOTA_EXCEEDED names the limit). */
  refused: { code: string; message: string; details: Record<string, unknown> | null } | null;
  /** Error events of the stream (a refusal after the turn started, e.g. provisioning), as `CODE: message`. */
  errors: string[];
};

const tenantId = process.env.MP_TENANT_ID!;
const principal = ownerPrincipalFromEnv();
const { runtime } = getApiComposition();

async function runTurn(sessionId: string): Promise<TurnOutcome> {
  const caller = createCaller(createContextInner({ runtime, principal }));
  const outcome: TurnOutcome = { sessionId, status: null, refused: null, errors: [] };
  let events: AsyncIterable<TChatTurnEvent>;
  try {
    events = await caller.chat.send({ tenantId, sessionId, message: `turn for ${sessionId}` });
  } catch (error) {
    const cause = (
      error as { cause?: { code?: string; userMessage?: string; details?: Record<string, unknown> } }
    ).cause;
    outcome.refused = {
      code: cause?.code ?? "UNKNOWN",
      message: cause?.userMessage ?? String(error),
      details: cause?.details ?? null,
    };
    return outcome;
  }
  for await (const event of events) {
    if (event.type === "done") outcome.status = event.status;
    if (event.type === "error") outcome.errors.push(`${event.code}: ${event.message}`);
  }
  return outcome;
}

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
const running: Promise<void>[] = [];
for await (const line of lines) {
  const [command, ...ids] = line.trim().split(/\s+/);
  if (command === "exit") break;
  if (command !== "send") continue;
  for (const sessionId of ids) {
    running.push(
      runTurn(sessionId).then((outcome) => void process.stdout.write(`${JSON.stringify(outcome)}\n`)),
    );
  }
}
await Promise.all(running);
await closeAgentServices();
await getEngine().close();
await getQueues().close();
await disconnectDb();
process.exit(0);
