/**
 * Berth's API as `npm start` runs it, without the minutes of a Next build: scripts/berth-process.ts's
 * root (createBerth installed as the process' Berth, every member built up front by buildApiProcess,
 * workers in-process) in this bundle, and the HTTP entry points (the tRPC handler, the skill-upload route
 * and the invitation route) from a SECOND bundle of Berth's modules (MP_NEXT_COPY, next-copy-entry.ts), as
 * Next's production bundle carries its own copy. The HTTP server in front does what npm start's does
 * (serveIncomingRequest: X-Forwarded-For set to the trusted client address, the request's async context
 * entered). Prints `ready <url>`; SIGTERM stops it.
 */
import { parseTrustedProxies } from "@/server/api/client-address";
import { buildApiProcess, createBerth } from "@/server/composition/berth";
import { closeProcessBerth, installProcessBerth } from "@/server/composition/process-berth";
import { loadConfig } from "@/server/config/config";
import { serveIncomingRequest } from "@/scripts/services/incoming-request";
import { startWorkerRuntime } from "@/workers/runtime";
import { serveFetchHandler } from "../api/support/serve-fetch-handler";
import type * as NextCopy from "./next-copy-entry";

const berth = installProcessBerth(createBerth(loadConfig()));
const { config } = berth;
buildApiProcess(berth);

const nextCopy = (await import(process.env.MP_NEXT_COPY!)) as typeof NextCopy;
const workers = await startWorkerRuntime({
  berth,
  redis: config.redis,
  workers: config.workers,
  log: berth.log.child({ process: "start-api" }),
  healthPort: null,
});
const trustedProxies = parseTrustedProxies(config.http.trustedProxies);
const SKILL_UPLOAD = /^\/api\/workspaces\/([^/]+)\/skills$/;

const served = await serveFetchHandler(
  (request) => {
    const { pathname } = new URL(request.url);
    const upload = SKILL_UPLOAD.exec(pathname);
    if (upload && request.method === "POST") {
      return nextCopy.uploadWorkspaceSkill(request, {
        params: Promise.resolve({ id: decodeURIComponent(upload[1]!) }),
      });
    }
    if (pathname === "/api/invitations/accept") return nextCopy.acceptInvitation(request);
    return nextCopy.handleTrpcRequest(request, nextCopy.processApiRuntime());
  },
  (req, res, serve) => serveIncomingRequest(req, res, trustedProxies, serve),
);
process.stdout.write(`ready ${served.url}\n`);

process.once("SIGTERM", () => {
  void (async () => {
    await served.close();
    await workers.stop();
    await closeProcessBerth();
    process.exit(0);
  })();
});
