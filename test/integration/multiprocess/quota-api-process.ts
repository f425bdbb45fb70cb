/**
 * A web replica for the multi-process quota tests: the process-wide composition a Next.js server builds
 * (processApiRuntime → the app router over the root's agent services and engine), called in-process through
 * the tRPC caller as a tenant's owner. Prints "ready"; then each stdin line `send {"tenantId", "userId",
 * "email", "sessionIds"}` (a SendRequest: the tenant and owner the turns are sent as) starts one
 * `chat.send` per session id at once, and each turn prints one JSON line (a TurnOutcome) when it ended.
 */
import { createInterface } from "node:readline";
import { createContextInner } from "@/server/api/context";
import { createCaller } from "@/server/api/root";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { getQueues } from "@/server/queue/queues";
import type { RequestPrincipal } from "@/server/auth/resolve";
import { ownerPrincipal } from "./processes";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processApiRuntime } from "@/server/api/composition";
import { processBerth } from "@/server/composition/process-berth";

export type SendRequest = { tenantId: string; userId: string; email: string; sessionIds: string[] };

export type TurnOutcome = {
  sessionId: string;
  /** The `done` event's status; null when the call was refused before the turn started. */
  status: string | null;
  /** `chat.send` rejected: the AppError code and details (QUOTA_EXCEEDED names the limit). */
  refused: { code: string; message: string; details: Record<string, unknown> | null } | null;
  /** Error events of the stream (a refusal after the turn started, e.g. provisioning), as `CODE: message`. */
  errors: string[];
};

const runtime = processApiRuntime();

async function runTurn(
  tenantId: string,
  principal: RequestPrincipal,
  sessionId: string,
): Promise<TurnOutcome> {
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
  if (line.trim() === "exit") break;
  if (!line.startsWith("send ")) continue;
  const request = JSON.parse(line.slice("send ".length)) as SendRequest;
  const principal = ownerPrincipal(request.userId, request.email);
  for (const sessionId of request.sessionIds) {
    running.push(
      runTurn(request.tenantId, principal, sessionId).then(
        (outcome) => void process.stdout.write(`${JSON.stringify(outcome)}\n`),
      ),
    );
  }
}
await Promise.all(running);
await closeProcessBerth();
await processBerth().engine.close();
await getQueues().close();
await closeProcessBerth();
process.exit(0);
