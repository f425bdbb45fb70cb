import path from "node:path";
import { text } from "node:stream/consumers";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { WORKSPACE_LAYOUT } from "@/server/workspace/layout";
import { parseMcpFile } from "@/server/workspace/mcp/mcp-file";
import { silentLogger } from "@/server/workspace/mcp/types";

/** What a workspace holds, listed before a purge so the receipt can say what was deleted. */
export type WorkspaceInventory = {
  /** `<partition>/<skill dir>` for every installed skill, the seed included. */
  skills: string[];
  /** `<agent>/<session>/<mcp name>` for every declared MCP ("" ids shown as "-"). */
  mcpDeclarations: string[];
  /** Files under `sessions/` (context.jsonl, tool results): the offload files. */
  offloadFiles: number;
  /** Content-addressed blocks under `data/`. */
  dataFiles: number;
};

export async function takeInventory(backend: WorkspaceMachine): Promise<WorkspaceInventory> {
  const at = (relative: string) => path.posix.join(backend.workdir, relative);
  const skills: string[] = [];
  for (const partition of await directories(backend, at(WORKSPACE_LAYOUT.skillsDir))) {
    for (const skill of await directories(backend, at(`${WORKSPACE_LAYOUT.skillsDir}/${partition}`))) {
      skills.push(`${partition}/${skill}`);
    }
  }
  const mcpDeclarations: string[] = [];
  const mcpText = await backend
    .readFile(at(WORKSPACE_LAYOUT.mcpFile))
    .then((stream) => text(stream))
    .catch(() => null);
  if (mcpText !== null) {
    for (const { scope, declarations } of parseMcpFile(mcpText, silentLogger).values()) {
      for (const declaration of declarations) {
        mcpDeclarations.push(`${scope.agentId || "-"}/${scope.sessionId || "-"}/${declaration.name}`);
      }
    }
  }
  let offloadFiles = 0;
  for (const session of await directories(backend, at(WORKSPACE_LAYOUT.sessionsDir))) {
    offloadFiles += await countFiles(backend, at(`${WORKSPACE_LAYOUT.sessionsDir}/${session}`));
  }
  return {
    skills,
    mcpDeclarations,
    offloadFiles,
    dataFiles: await countFiles(backend, at(WORKSPACE_LAYOUT.dataDir)),
  };
}

/** Offload files of some sessions (a session purge's receipt). */
export async function countSessionFiles(
  backend: WorkspaceMachine,
  sessionIds: readonly string[],
): Promise<number> {
  let total = 0;
  for (const sessionId of sessionIds) {
    if (sessionId.includes("/") || sessionId === "." || sessionId === "..") continue;
    total += await countFiles(
      backend,
      path.posix.join(backend.workdir, WORKSPACE_LAYOUT.sessionsDir, sessionId),
    );
  }
  return total;
}

async function directories(backend: WorkspaceMachine, dir: string): Promise<string[]> {
  const entries = await backend.list(dir).catch(() => []);
  return entries.filter((entry) => entry.type === "directory").map((entry) => entry.name);
}

async function countFiles(backend: WorkspaceMachine, dir: string): Promise<number> {
  const entries = await backend.list(dir).catch(() => []);
  return entries.filter((entry) => entry.type === "file").length;
}
