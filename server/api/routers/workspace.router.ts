import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { ZBackendKind } from "@/server/modules/agent/agent.types";
import { ZWorkspaceEventKind, ZWorkspaceState } from "@/server/modules/workspace/workspace.types";
import { workspaceFilesRouter } from "./workspace.files.router";
import { workspaceMcpRouter } from "./workspace.mcp.router";
import { workspacePreviewsRouter } from "./workspace.previews.router";
import { workspaceSkillRouter } from "./workspace.skill.router";
import type { Berth } from "@/server/composition/berth";

const ZWorkspaceTarget = ZTenantInput.extend({ workspaceId: z.string().min(1).max(200) });

const services = (ctx: { berth: Berth }) => ctx.berth.workspaces;

/**
 * `workspace.*`: lifecycle and inspection of the tenant's workspaces. Reads are open to viewers; stop and
 * purge need `workspace:manage` (admins). Every call is tenant-scoped in the data layer.
 */
export const workspaceRouter = createTRPCRouter({
  list: tenantProcedureFor("workspace:read")
    .input(
      ZTenantInput.extend({
        states: z.array(ZWorkspaceState).max(20).optional(),
        backendKinds: z.array(ZBackendKind).max(10).optional(),
        agentId: z.string().min(1).max(200).optional(),
        /** Part of the agent's name (case-insensitive). */
        agentName: z.string().min(1).max(200).optional(),
        /** Idle at least this long (ms since the last activity). */
        idleForMs: z.number().int().min(0).optional(),
        /** true: holds a live lease now; false: holds none. */
        leased: z.boolean().optional(),
        limit: z.number().int().min(1).max(200).optional(),
        cursor: z.string().min(1).max(200).optional(),
      }),
    )
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      services(ctx).service.list(ctx.scope, input),
    ),

  /** The installation's workspace backend: `{ backend, isolated, sandbox }` (host-unconfined → isolated false). */
  backend: tenantProcedureFor("workspace:read")
    .input(ZTenantInput)
    .query(({ ctx }) => services(ctx).service.backendInfo()),

  /**
   * Every backend this installation runs (kind, driver, isolated, what stop keeps) with the installation's
   * and the tenant's defaults: what the agent form and the settings page offer.
   */
  backends: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .query(({ ctx }) => services(ctx).service.backends.options(ctx.scope)),

  /** The tenant's default backend for new workspaces (null: the installation's); owners and admins. */
  setDefaultBackend: tenantProcedureFor("tenant:manage")
    .input(ZTenantInput.extend({ defaultBackend: ZBackendKind.nullable() }))
    .mutation(({ ctx, input }) =>
      services(ctx).service.backends.setTenantDefault(ctx.scope, { defaultBackend: input.defaultBackend }),
    ),

  /** State, backend, trusted-only flag, idle time, active leases and the last events with their reasons. */
  get: tenantProcedureFor("workspace:read")
    .input(ZWorkspaceTarget)
    .query(({ ctx, input }) => services(ctx).service.get(ctx.scope, input.workspaceId)),

  /** The ledger, newest first, paged by `cursor`; `kinds` keeps only those kinds of events. */
  events: tenantProcedureFor("workspace:read")
    .input(
      ZWorkspaceTarget.extend({
        kinds: z.array(ZWorkspaceEventKind).max(20).optional(),
        limit: z.number().int().min(1).max(200).optional(),
        cursor: z.string().min(1).max(200).optional(),
      }),
    )
    .query(({ ctx, input: { workspaceId, kinds, limit, cursor } }) =>
      services(ctx).service.events(ctx.scope, workspaceId, { kinds, limit, cursor }),
    ),

  stop: tenantProcedureFor("workspace:manage")
    .input(
      ZWorkspaceTarget.extend({ force: z.boolean().default(false), reason: z.string().max(500).optional() }),
    )
    .mutation(({ ctx, input }) =>
      services(ctx).service.requestStop(ctx.scope, input.workspaceId, {
        force: input.force,
        ...(input.reason ? { reason: input.reason } : {}),
      }),
    ),

  /** Starts a STOPPED, FAILED or never provisioned workspace (the provision job); READY ones stay as they are. */
  start: tenantProcedureFor("workspace:manage")
    .input(ZWorkspaceTarget)
    .mutation(({ ctx, input }) => services(ctx).service.requestStart(ctx.scope, input.workspaceId)),

  /** Names the workspace on the dashboard (null or blank clears it). */
  setLabel: tenantProcedureFor("workspace:manage")
    .input(ZWorkspaceTarget.extend({ label: z.string().max(100).nullable() }))
    .mutation(({ ctx, input }) => services(ctx).service.setLabel(ctx.scope, input.workspaceId, input.label)),

  /**
   * Stop, start or purge many workspaces: each through its own request (audited, its own job), with a
   * per-workspace outcome (`ok`, the state, or the error that refused it); one refusal does not stop the rest.
   */
  bulk: tenantProcedureFor("workspace:manage")
    .input(
      ZTenantInput.extend({
        action: z.enum(["stop", "start", "purge"]),
        workspaceIds: z.array(z.string().min(1).max(200)).min(1).max(100),
        force: z.boolean().default(false),
      }),
    )
    .mutation(({ ctx, input }) =>
      services(ctx).service.bulk(ctx.scope, {
        action: input.action,
        workspaceIds: input.workspaceIds,
        force: input.force,
      }),
    ),

  purge: tenantProcedureFor("workspace:manage")
    .input(
      ZWorkspaceTarget.extend({ force: z.boolean().default(false), reason: z.string().max(500).optional() }),
    )
    .mutation(({ ctx, input }) =>
      services(ctx).service.requestPurge(ctx.scope, input.workspaceId, {
        force: input.force,
        ...(input.reason ? { reason: input.reason } : {}),
      }),
    ),

  /** Git status of the workdir (or of `cwd` inside it), best effort as in the reference. */
  status: tenantProcedureFor("workspace:read")
    .input(ZWorkspaceTarget.extend({ cwd: z.string().max(4096).optional() }))
    .query(({ ctx, input }) => services(ctx).content.status(ctx.scope, input.workspaceId, input.cwd)),

  /** What purges deleted, per tenant (workspaces, sessions, agents), with who asked for each by name. */
  purgeReceipts: tenantProcedureFor("audit:read")
    .input(
      ZTenantInput.extend({
        targetType: z.enum(["workspace", "session", "agent"]).optional(),
        targetId: z.string().min(1).max(200).optional(),
        limit: z.number().int().min(1).max(200).optional(),
      }),
    )
    .query(({ ctx, input }) => services(ctx).service.purgeReceipts(ctx.scope, input)),

  mcp: workspaceMcpRouter,
  skill: workspaceSkillRouter,
  files: workspaceFilesRouter,
  previews: workspacePreviewsRouter,
});
