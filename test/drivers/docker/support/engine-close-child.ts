/**
 * Child process of engine-close-handles.test.ts: a worker provisions a Docker workspace (gateway launch),
 * an engine-style manager attaches and uses it (exec, gateway file ops), the manager is closed as
 * `engine.close()` does and the worker purges. Then it prints the sockets still open and returns from its
 * top level: with nothing left open the process exits by itself.
 * argv: <dataRoot> <runtimeRoot> <workspaceId>
 */
import { RecordAttacher } from "@/server/engine/record-attacher";
import { createDriverSet } from "@/server/engine/driver-set";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { WorkspaceManager } from "@/server/workspace/manager/workspace-manager";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";

const [dataRoot, runtimeRoot, workspaceId] = process.argv.slice(2) as [string, string, string];
const config = loadEngineConfig({
  BERTH_WORKSPACE_BACKEND: "docker",
  BERTH_WORKSPACE_BASEDIR: dataRoot,
  DOCKER_SOCKET: process.env.DOCKER_SOCKET ?? "/var/run/docker.sock",
  BERTH_DOCKER_BASE_IMAGE: process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm",
  BERTH_DOCKER_RUNTIME_ROOT: runtimeRoot,
  BERTH_DOCKER_MEMORY_BYTES: String(512 * 1024 * 1024),
});
const spec: WorkspaceSpec = {
  tenantId: "tenant-test",
  userId: "user-test",
  agentId: "agent-test",
  workspaceId,
  isolation: "per_agent",
};

// One installation: the worker's and the API's drivers share its id.
const installationId = () => Promise.resolve("test-engine-close");
const worker = createDriverSet(config, undefined, { installationId }).default;
const handle = await worker.create(spec);
const api = createDriverSet(config, undefined, { installationId });
const manager = new WorkspaceManager({
  attacher: new RecordAttacher(api, () => Promise.resolve({ kind: "docker", handle })),
  evictIntervalMs: null,
  livenessIntervalMs: 0,
});
const workspace = await manager.getWorkspace(spec);
await workspace.machine.exec(["sh", "-c", "echo hi > note.txt"]);
await workspace.machine.writeFile("note2.txt", "through the gateway");
await workspace.machine.stat("note2.txt");
await manager[Symbol.asyncDispose](); // what engine.close() does
await worker.stop(spec);
await worker.purge(spec);

// Sockets other than our own stdio pipes: what would keep this process alive.
const sockets = (process as unknown as { _getActiveHandles(): unknown[] })
  ._getActiveHandles()
  .filter((handle) => handle?.constructor?.name === "Socket")
  .filter((socket) => ![process.stdout, process.stderr, process.stdin].includes(socket as never));
process.stdout.write(`closed; open sockets: ${sockets.length}\n`);
