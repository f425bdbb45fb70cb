/**
 * A web replica for the multi-process chat test: the process-wide composition a Next.js server builds
 * (processApiRuntime → the app router whose `chat` procedures use the root's agent services over
 * processBerth().engine), called in-process through the tRPC caller. Prints "ready", waits for a "go" line on stdin,
 * then runs one real `chat.send` turn for each session of MP_SESSION_IDS (comma-separated) at once, drains
 * every event stream to its end and prints one JSON line: a summary per session.
 */
import { createInterface } from "node:readline";
import { createContextInner } from "@/server/api/context";
import { createCaller } from "@/server/api/root";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { getQueues } from "@/server/queue/queues";
import { ownerPrincipalFromEnv } from "./processes";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processApiRuntime } from "@/server/api/composition";
import { processBerth } from "@/server/composition/process-berth";

export type TurnSummary = {
  sessionId: string;
  /** The `done` event's status, or null when the stream ended without one (or the call threw). */
  status: string | null;
  /** The event types in order (a completed tool turn: tool-call, tool-result, text-delta…, done). */
  types: string[];
  toolResults: { toolName: string; isError: boolean; output: string }[];
  errors: string[];
};

const tenantId = process.env.MP_TENANT_ID!;
const sessionIds = process.env.MP_SESSION_IDS!.split(",");
const principal = ownerPrincipalFromEnv();
const runtime = processApiRuntime();

async function runTurn(sessionId: string): Promise<TurnSummary> {
  // One context per call, as each HTTP request gets its own.
  const caller = createCaller(createContextInner({ runtime, principal }));
  const summary: TurnSummary = { sessionId, status: null, types: [], toolResults: [], errors: [] };
  try {
    const events: AsyncIterable<TChatTurnEvent> = await caller.chat.send({
      tenantId,
      sessionId,
      message: `turn for ${sessionId}`,
    });
    for await (const event of events) {
      summary.types.push(event.type);
      if (event.type === "done") summary.status = event.status;
      if (event.type === "error") summary.errors.push(`${event.code}: ${event.message}`);
      if (event.type === "tool-result") {
        const { toolName, isError, output } = event;
        summary.toolResults.push({ toolName, isError, output });
      }
    }
  } catch (error) {
    summary.errors.push(`send threw: ${String(error)}`);
  }
  return summary;
}

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== "go") continue;
  const summaries = await Promise.all(sessionIds.map(runTurn));
  process.stdout.write(`${JSON.stringify(summaries)}\n`);
  break;
}
await closeProcessBerth();
await processBerth().engine.close();
await getQueues().close();
await closeProcessBerth();
process.exit(0);
