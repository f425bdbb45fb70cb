import type { Duplex } from "node:stream";
import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import { resolveSystemTenantScope, resolveTenantScope, type RequestPrincipal } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import { requireWorkspaceRecord } from "@/server/modules/workspace/workspace-attach";
import { assertMayActOnWorkspace } from "@/server/modules/workspace/workspace-access";
import type { WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { AppError } from "@/server/shared/errors";
import { MAX_TUNNEL_PORT, MIN_TUNNEL_PORT } from "@/server/workspace/gateway/gateway-protocol";
import { previewUrl } from "./preview-path";
import { TunnelSlots } from "./tunnel-slots";
import {
  deleteWorkspacePreview,
  findPreviewTarget,
  insertWorkspacePreview,
  listWorkspacePreviews,
} from "./preview.data";
import {
  DEFAULT_SHARE_TTL_MS,
  MAX_SHARE_TTL_MS,
  previewShareKey,
  signPreviewToken,
  verifyPreviewToken,
  type PreviewTarget,
} from "./preview-token";

export const ZPreviewPort = z.number().int().min(MIN_TUNNEL_PORT).max(MAX_TUNNEL_PORT);
export const ZShareTtlMs = z.number().int().min(60_000).max(MAX_SHARE_TTL_MS).default(DEFAULT_SHARE_TTL_MS);

/** Open tunnels per workspace in one process (tunnel-slots.ts): a busy dev page opens a few dozen. */
const TUNNELS_PER_WORKSPACE = 64;

export type PreviewDeps = {
  db: Db;
  workspaces: WorkspaceService;
  /** The installation's auth secret: share links are keyed by a key derived from it (preview-token.ts). */
  authSecret: string;
  /** The preview origin (BERTH_PREVIEW_PORT / BERTH_PREVIEW_URL), never the dashboard's; null: previews off. */
  previewUrl: string | null;
};

/**
 * Preview URLs (ARCHITECTURE.md "Preview URLs"): which ports of a workspace members exposed, share links,
 * and, for the proxy (server/api/preview-proxy.ts), who may reach a port and the tunnel to it. Nothing here
 * takes a lease or moves a workspace's idle clock: preview traffic is passive, so an open preview tab never
 * keeps a workspace from the sweep (only turns, terminals and leased calls do).
 */
export function createPreviewService(deps: PreviewDeps) {
  const key = previewShareKey(deps.authSecret);
  const { db, workspaces } = deps;
  const slots = new TunnelSlots(TUNNELS_PER_WORKSPACE);
  /** The preview origin, or a refusal that says previews are off on this installation. */
  const previewOrigin = (): string => {
    if (deps.previewUrl) return deps.previewUrl;
    throw new AppError("UNPROCESSABLE", "previews are off (BERTH_PREVIEW_PORT is not set)", {
      userMessage:
        "Previews are off on this installation: an operator sets BERTH_PREVIEW_PORT (an origin of their own).",
      details: { reason: "previews_not_configured" },
    });
  };
  const toView =
    (workspaceId: string) => (preview: { port: number; createdBy: string | null; createdAt: Date }) => ({
      ...preview,
      url: deps.previewUrl ? previewUrl(deps.previewUrl, { workspaceId, port: preview.port }) : null,
    });

  /** The record when the caller may see the workspace (NOT_FOUND otherwise, whatever the reason). */
  const visibleRecord = async (scope: TenantScope, workspaceId: string) => {
    const record = await requireWorkspaceRecord(scope, workspaceId, db);
    await assertMayActOnWorkspace(scope, record, db);
    return record;
  };

  return {
    async list(scope: TenantScope, workspaceId: string) {
      assertCan(scope, "workspace:read");
      const record = await visibleRecord(scope, workspaceId);
      const previews = await listWorkspacePreviews(db, scope, workspaceId);
      const supported = workspaces.engine.drivers.find(record.backendKind)?.capabilities.previews ?? false;
      return { supported, enabled: deps.previewUrl !== null, previews: previews.map(toView(workspaceId)) };
    },

    async expose(scope: TenantScope, workspaceId: string, port: number) {
      assertCan(scope, "workspace:manage");
      return workspaces.audited(scope, "workspace.preview.expose", workspaceId, { port }, async () => {
        await visibleRecord(scope, workspaceId);
        previewOrigin();
        const { preview, created } = await insertWorkspacePreview(db, scope, workspaceId, port, scope.userId);
        return { ...toView(workspaceId)(preview), created };
      });
    },

    async unexpose(scope: TenantScope, workspaceId: string, port: number) {
      assertCan(scope, "workspace:manage");
      return workspaces.audited(scope, "workspace.preview.unexpose", workspaceId, { port }, async () => {
        await visibleRecord(scope, workspaceId);
        return { removed: await deleteWorkspacePreview(db, scope, workspaceId, port) };
      });
    },

    /** A link anyone holding it may open until `expiresAt`, while the port stays exposed. */
    async shareLink(scope: TenantScope, workspaceId: string, port: number, ttlMs: number) {
      assertCan(scope, "workspace:manage");
      const expiresAt = new Date(Date.now() + Math.min(ttlMs, MAX_SHARE_TTL_MS));
      return workspaces.audited(
        scope,
        "workspace.preview.share",
        workspaceId,
        { port, expiresAt: expiresAt.toISOString() },
        async () => {
          await visibleRecord(scope, workspaceId);
          const exposed = (await listWorkspacePreviews(db, scope, workspaceId)).some((p) => p.port === port);
          if (!exposed) throw notExposed(port);
          const token = signPreviewToken(key, { workspaceId, port }, expiresAt);
          return { url: previewUrl(previewOrigin(), { workspaceId, port }, token), expiresAt };
        },
      );
    },

    /**
     * Who may reach a preview: a signed-in member of the workspace's tenant who may read it (members: their
     * own sessions' workspaces), or the holder of a valid share token. Answers the scope the tunnel is opened
     * under; NOT_FOUND for a workspace the caller may not know of (another tenant's), UNAUTHORIZED when there
     * are no credentials, NOT_FOUND for a port nobody exposed (a revoked preview ends its share links too).
     */
    async authorize(
      target: PreviewTarget,
      credentials: { principal: RequestPrincipal | null; shareToken: string | null },
    ): Promise<{ scope: TenantScope; via: "member" | "share" }> {
      const found = await findPreviewTarget(db, target.workspaceId, target.port);
      const shared =
        credentials.shareToken !== null && verifyPreviewToken(key, target, credentials.shareToken) !== null;
      if (!found) throw shared || credentials.principal ? notFound() : unauthorized();
      let scope: TenantScope;
      let via: "member" | "share";
      if (shared) {
        scope = await resolveSystemTenantScope(found.tenantId, {}, db).catch(() =>
          Promise.reject(notFound()),
        );
        via = "share";
      } else if (credentials.principal) {
        scope = await resolveTenantScope(credentials.principal, found.tenantId, db).catch(() =>
          Promise.reject(notFound()),
        );
        if (!(await memberMaySee(scope, target.workspaceId))) throw notFound();
        via = "member";
      } else {
        throw unauthorized();
      }
      if (!found.exposed) throw notExposed(target.port);
      return { scope, via };
    },

    /**
     * A fresh connection to the port inside the workspace's machine. CONFLICT when the workspace is not
     * running (a preview never starts one: that would make opening a link count as work).
     */
    async openTunnel(scope: TenantScope, target: PreviewTarget): Promise<Duplex> {
      const record = await requireWorkspaceRecord(scope, target.workspaceId, db);
      if (record.state !== "READY") {
        throw new AppError("CONFLICT", `workspace ${record.id} is ${record.state}`, {
          userMessage: `The workspace is ${record.state.toLowerCase()}: previews need it running. Start it first.`,
          details: { reason: "workspace_not_running", state: record.state },
        });
      }
      if (!workspaces.engine.drivers.find(record.backendKind)?.capabilities.previews) {
        throw previewsUnsupported(record.backendKind);
      }
      const workspace = await workspaces.attach(scope, record);
      const { machine } = workspace;
      if (!machine.openTunnel) throw previewsUnsupported(record.backendKind);
      return slots.hold(record.id, () => machine.openTunnel!(target.port));
    },
  };

  async function memberMaySee(scope: TenantScope, workspaceId: string): Promise<boolean> {
    try {
      assertCan(scope, "workspace:read");
      await visibleRecord(scope, workspaceId);
      return true;
    } catch {
      return false;
    }
  }
}

export type PreviewService = ReturnType<typeof createPreviewService>;

function notFound(): AppError {
  return new AppError("NOT_FOUND", "preview not found", { userMessage: "Preview not found." });
}

function unauthorized(): AppError {
  return new AppError("UNAUTHORIZED", "no credentials for a preview", {
    userMessage: "Sign in to Berth, or open the preview's share link.",
  });
}

function notExposed(port: number): AppError {
  return new AppError("NOT_FOUND", `port ${port} is not exposed`, {
    userMessage: `Port ${port} of this workspace is not exposed as a preview.`,
    details: { reason: "port_not_exposed", port },
  });
}

function previewsUnsupported(kind: string): AppError {
  return new AppError("UNPROCESSABLE", `backend ${kind} cannot tunnel`, {
    userMessage: "This workspace's backend does not offer previews.",
    details: { reason: "previews_unsupported", backendKind: kind },
  });
}
