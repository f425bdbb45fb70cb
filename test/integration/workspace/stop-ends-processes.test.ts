import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import type { BubblewrapMachine } from "@/server/workspace/drivers/bubblewrap/bubblewrap-machine";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { everythingMcp } from "../../unit/workspace/support/mcp-servers";
import { hostProcessesMatching, pollUntil } from "../../drivers/local/support/sandbox-env";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Issue 9 E: stdio MCP servers survived workspace.stop and workspace.purge (alive minutes later with a
 * deleted cwd). The API process starts them; a worker stops or purges: every process the workspace
 * started must end, MCP servers and running commands alike.
 */
describe("workspace stop and purge end every process the workspace started", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h.close();
  });

  const stateOf = async (workspaceId: string) =>
    (await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state;

  for (const action of ["stop", "purge"] as const) {
    it(`a ${action} through the workers ends the stdio MCP servers and commands the API process started`, async () => {
      const { session, workspaceId } = await freshSession(tenant.scope);
      const { workspace } = await h.service.resolveForSession(tenant.scope, session.id);
      const uid = (workspace.machine as BubblewrapMachine).options.identity.uid;
      await workspace.addMcp(everythingMcp("everything"), { agentId: session.agentId, sessionId: "" });
      const marker = `berth-lifecycle-${action}-${workspaceId}`;
      const running = workspace.machine.exec(["/bin/sh", "-c", `exec sleep 600 # ${marker}`]);
      const servers = await pollUntil(
        () => hostProcessesMatching("server-everything/dist/index.js", uid),
        (pids) => pids.length > 0,
      );
      expect(servers.length).toBeGreaterThan(0);
      await pollUntil(
        () => hostProcessesMatching(marker),
        (pids) => pids.length > 0,
      );

      if (action === "stop") await h.service.requestStop(tenant.scope, workspaceId, { reason: "test" });
      else await h.service.requestPurge(tenant.scope, workspaceId, { reason: "test" });
      const done = action === "stop" ? "STOPPED" : "PURGED";
      await vi.waitFor(async () => expect(await stateOf(workspaceId)).toBe(done), { timeout: 30_000 });

      expect((await running).exitCode).toBe(-1);
      const left = await pollUntil(
        async () => [
          ...(await hostProcessesMatching("server-everything/dist/index.js", uid)),
          ...(await hostProcessesMatching(marker)),
        ],
        (pids) => pids.length === 0,
      );
      expect(left).toEqual([]);
    });
  }
});
