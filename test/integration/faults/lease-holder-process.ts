/**
 * A process holding workspace leases as a web replica does: the process composition's workspace service
 * (its lease owner id beating in the `holders` set), over in-process workers on the local backend (the
 * workspace harness); its database is whatever DATABASE_URL names (the test's TCP proxy). Prints `ready`.
 * On `turn <tenantId> <sessionId>` it runs a turn's work under a `turn:` lease on the session's workspace,
 * the way chat does: prints `leased <holder>`, waits for `end`, ends the work (releasing the lease) and
 * prints `ended`. On `close` it shuts down as `npm start` does and prints `closed`.
 */
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import { startWorkspaceHarness } from "../workspace/harness";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { installTestBerth } from "@/test/setup/test-berth";
import { processBerth } from "@/server/composition/process-berth";

const harness = await startWorkspaceHarness();
await installTestBerth({ engine: harness.engine });
const { service } = processBerth().workspaces;

let endTurn: (() => void) | undefined;
const say = (line: string) => process.stdout.write(`${line}\n`);

async function runTurn(tenantId: string, sessionId: string): Promise<void> {
  const scope = await resolveSystemTenantScope(tenantId, undefined, processBerth().db);
  const holder = `turn:${randomUUID()}`;
  await service.withSessionWorkspace(scope, sessionId, { holder, reason: "chat turn" }, async () => {
    say(`leased ${holder}`);
    await new Promise<void>((resolve) => (endTurn = resolve));
  });
  say("ended");
}

say("ready");
for await (const line of createInterface({ input: process.stdin })) {
  const [command, ...args] = line.trim().split(" ");
  if (command === "turn")
    void runTurn(args[0]!, args[1]!).catch((error: unknown) => say(`failed ${String(error)}`));
  if (command === "end") endTurn?.();
  if (command === "close") {
    await closeProcessBerth();
    await harness.close();
    say("closed");
    process.exit(0);
  }
}
