import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { AppError, isAppError } from "@/server/shared/errors";
import { findDeletedSession } from "./deleted-session.data";
import { getSession } from "./session.data";
import type { SessionDTO } from "./session.types";

/**
 * The session, or why it is gone: a session deleted with its agent answers NOT_FOUND with
 * `details.reason: "agent_deleted"` and a message naming the agent, so an open tab's Send says what happened
 * (and the page offers the way back to the sessions list) instead of a bare "Session not found.".
 */
export async function getSessionOrWhyGone(
  scope: TenantScope,
  sessionId: string,
  db: Db,
): Promise<SessionDTO> {
  try {
    return await getSession(scope, sessionId, db);
  } catch (error) {
    if (!isAppError(error) || error.code !== "NOT_FOUND") throw error;
    const gone = await findDeletedSession(scope, sessionId, db);
    if (!gone) throw error;
    throw new AppError("NOT_FOUND", `session ${sessionId} was deleted with agent ${gone.agentId}`, {
      userMessage:
        `This session's agent "${gone.agentName}" was deleted, and its sessions with it: ` +
        "your message was not sent. Start a new session from the sessions list.",
      details: {
        reason: "agent_deleted",
        sessionId,
        agentId: gone.agentId,
        agentName: gone.agentName,
        deletedAt: gone.deletedAt.toISOString(),
      },
    });
  }
}
