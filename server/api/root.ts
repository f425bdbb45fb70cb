/**
 * The API's public surface. Router names are what typed clients call (`client.tenant.overview`), so
 * renaming one is a breaking change. Add a router: write `routers/<name>.router.ts` with the builders
 * from trpc.ts, mount it here, and add its procedures to the cross-tenant test
 * (test/integration/api/cross-tenant.test.ts fails until you do).
 */
import { accountRouter } from "@/server/api/routers/account.router";
import { apiKeyRouter } from "@/server/api/routers/api-key.router";
import { auditRouter } from "@/server/api/routers/audit.router";
import { backendSettingsRouter } from "@/server/api/routers/backend-settings.router";
import { inviteRouter } from "@/server/api/routers/invite.router";
import { memberRouter } from "@/server/api/routers/member.router";
import { operatorRouter } from "@/server/api/routers/operator.router";
import { tenantRouter } from "@/server/api/routers/tenant.router";
import { workspaceRouter } from "@/server/api/routers/workspace.router";
import { agentRouter } from "@/server/api/routers/agent.router";
import { chatRouter } from "@/server/api/routers/chat.router";
import { jobsRouter } from "@/server/api/routers/jobs.router";
import { libraryRouter } from "@/server/api/routers/library.router";
import { liveRouter } from "@/server/api/routers/live.router";
import { operationsRouter } from "@/server/api/routers/operations.router";
import { quotaRouter } from "@/server/api/routers/quota.router";
import { sessionRouter } from "@/server/api/routers/session.router";
import { checkpointRouter } from "@/server/api/routers/checkpoint.router";
import { egressRouter } from "@/server/api/routers/egress.router";
import { createCallerFactory, createTRPCRouter } from "@/server/api/trpc";

export const appRouter = createTRPCRouter({
  tenant: tenantRouter,
  account: accountRouter,
  member: memberRouter,
  invite: inviteRouter,
  apiKey: apiKeyRouter,
  audit: auditRouter,
  backendSettings: backendSettingsRouter,
  workspace: workspaceRouter,
  egress: egressRouter,
  agent: agentRouter,
  session: sessionRouter,
  checkpoint: checkpointRouter,
  chat: chatRouter,
  jobs: jobsRouter,
  library: libraryRouter,
  /** Live pages: one change stream (SSE) per page. */
  live: liveRouter,
  /** Above tenants: operators only. */
  operator: operatorRouter,
  operations: operationsRouter,
  quota: quotaRouter,
});

export type AppRouter = typeof appRouter;

/** In-process calls with a context from `createContextInner` (tests, server components). */
export const createCaller = createCallerFactory(appRouter);
