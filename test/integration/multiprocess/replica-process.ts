/**
 * A web replica that takes its requests from the test: the process-wide composition a Next.js server
 * builds, with the app router called in-process through the tRPC caller as the signed-in owner (the
 * tenant gate still reads the membership from the database). Prints "ready"; then, per stdin line
 * `{"id", "path": "workspace.mcp.add", "input": {...}}`, calls that procedure and prints one line
 * `{"id", "ok": true, "result"}` or `{"id", "ok": false, "error": {code, message}}`.
 */
import { createInterface } from "node:readline";
import { createContextInner } from "@/server/api/context";
import { createCaller } from "@/server/api/root";
import { getQueues } from "@/server/queue/queues";
import { ownerPrincipalFromEnv } from "./processes";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processApiRuntime } from "@/server/api/composition";
import { processBerth } from "@/server/composition/process-berth";

export type ReplicaRequest = { id: number; path: string; input: unknown };
export type ReplicaAnswer =
  | { id: number; ok: true; result: unknown }
  | { id: number; ok: false; error: { code: string; message: string } };

const principal = ownerPrincipalFromEnv();
const runtime = processApiRuntime();

async function call(request: ReplicaRequest): Promise<ReplicaAnswer> {
  const caller = createCaller(createContextInner({ runtime, principal }));
  let target: unknown = caller;
  for (const segment of request.path.split(".")) target = (target as Record<string, unknown>)[segment];
  try {
    const result = await (target as (input: unknown) => Promise<unknown>)(request.input);
    return { id: request.id, ok: true, result };
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    return {
      id: request.id,
      ok: false,
      error: { code: code ?? "UNKNOWN", message: message ?? String(error) },
    };
  }
}

process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "exit") break;
  const answer = await call(JSON.parse(line) as ReplicaRequest);
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
await processBerth().engine.close();
await getQueues().close();
await closeProcessBerth();
process.exit(0);
