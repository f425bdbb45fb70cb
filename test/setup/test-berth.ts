import { type Berth, createBerth, type CreateBerthOptions } from "@/server/composition/berth";
import { closeProcessBerth, installProcessBerth, processBerth } from "@/server/composition/process-berth";
import { loadConfig } from "@/server/config/config";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { createSessionService } from "@/server/modules/session/session.service";
import { createWorkspaceService, type WorkspaceService } from "@/server/modules/workspace/workspace.service";

/**
 * Makes a Berth over a harness' engine or queues this process' root, as `npm start` installs its own
 * (createBerth over the environment, with `options` used instead of what it would build). The root held
 * until now is closed first; `closeProcessBerth()` undoes it (the next use builds a plain one again).
 */
export async function installTestBerth(options: CreateBerthOptions): Promise<Berth> {
  await closeProcessBerth();
  return installProcessBerth(createBerth(loadConfig(), options));
}

/** A workspace service over a harness' own `engine`, with everything else from this process' root. */
export function workspaceServiceOver(engine: WorkspaceEngine): WorkspaceService {
  return createWorkspaceService(engine, {
    lifecycle: processBerth().lifecycle,
    audit: processBerth().audit,
    db: processBerth().db,
    attachTracker: () => processBerth().attachTracker,
    quota: () => processBerth().quota,
  });
}

/** A session service over `workspaceServiceOver(engine)`, with everything else from this process' root. */
export function sessionServiceOver(engine: WorkspaceEngine) {
  return createSessionService({
    audit: processBerth().audit,
    db: processBerth().db,
    quota: () => processBerth().quota,
    workspaces: workspaceServiceOver(engine),
  });
}
