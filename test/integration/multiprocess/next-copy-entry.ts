/**
 * The HTTP entry points as Next's production bundle carries them: bundled apart from the composition, so
 * they run on a SECOND copy of Berth's server modules in the same process, as under `npm start` (see
 * start-api-process.ts and server/shared/process-root.ts).
 */
export { processApiRuntime } from "@/server/api/composition";
export { handleTrpcRequest } from "@/server/api/http-handler";
export { POST as uploadWorkspaceSkill } from "@/app/api/workspaces/[id]/skills/route";
export { POST as acceptInvitation } from "@/app/api/invitations/accept/route";
