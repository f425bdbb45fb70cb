import { createHash } from "node:crypto";
import type { Sandbox } from "e2b";
import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import type { BackendHandle, CreateProgress, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { ListedSandbox } from "./e2b-client";
import { ensureGateway, gatewayBundle, removeCredentials } from "./e2b-gateway";
import {
  installationMetadata,
  METADATA,
  poolIdOf,
  poolMetadata,
  workspaceFilter,
  type E2bHandle,
} from "./e2b-naming";
import { checkTemplateSize, writeMarker } from "./e2b-prepare";
import { poolState, readBinding, removeBinding, writeBinding } from "./e2b-pool-bindings";
import type { E2bSandboxes } from "./e2b-sandboxes";
import type { E2bTeams } from "./e2b-teams";

/** Bump when what a pool machine bakes in changes in a way the digested config does not show. */
const POOL_KEY_VERSION = 1;

/** The pool row's id (server/modules/pool): letters, digits and `-`. */
const ZPoolId = z.string().regex(/^[a-zA-Z0-9-]{1,64}$/);

/** What `createIdleMachine` returns and the pool row stores: the sandbox of an unbound pool machine. */
const ZIdleHandle = z.object({ kind: z.literal("e2b"), pool: ZPoolId, sandboxId: z.string().min(1) });

/**
 * E2B's warm pool: sandboxes made in the INSTALLATION's team from its template, carrying only this
 * installation's metadata and their pool id and key (no tenant, user, workspace, no env), prepared as a
 * cold create prepares one (workdir, root folder, gateway started), and kept at the same E2B timeout.
 * Binding one writes who it belongs to (e2b-pool-bindings.ts: a host record and the root-only marker;
 * E2B metadata cannot change) and returns a handle with its sandbox id and pool id, which every later
 * operation follows. Tenants with their own team or template are refused at bind: the core then creates a
 * sandbox in their team the usual way.
 *
 * Timeouts: pool sandboxes are created with the cold path's timeout and `onTimeout` (once bound they must
 * keep files as a cold one does). An idle one's timeout is refreshed by `listIdleMachines`, which the
 * refill runs every tick. If the workers are down longer than that, E2B pauses it (or kills it, with
 * BERTH_E2B_ON_TIMEOUT=kill): a paused idle one is never bound (`bind` refuses it, so the core discards it
 * and creates cold at once), and the next `listIdleMachines` resumes it; a killed one fails its bind the
 * same way.
 */
export class E2bWarmPool {
  constructor(private readonly teams: E2bTeams) {}

  private get sandboxes(): E2bSandboxes {
    return this.teams.installation;
  }

  /** Template, team, sizes, gateway bundle and everything else a sandbox is created with. */
  async key(): Promise<string> {
    const { config } = this.sandboxes;
    const bundle = await gatewayBundle(config);
    const inputs = {
      POOL_KEY_VERSION,
      // The team: its key (digested, never stored) and where its API is.
      team: createHash("sha256").update(config.apiKey).digest("hex"),
      api: [config.apiUrl ?? null, config.domain ?? null],
      template: config.template,
      sizes: [config.minCpuCount ?? null, config.minMemoryMB ?? null],
      gateway: [bundle.sandboxPath, config.gateway.port, config.nodeCommand],
      sandbox: [config.user, config.workdir, config.onTimeout, config.allowInternetAccess],
    };
    return createHash("sha256").update(JSON.stringify(inputs)).digest("hex").slice(0, 16);
  }

  /**
   * Create-or-reuse of the pool sandbox `id`, prepared and with its gateway healthy. Idempotent per id: a
   * sandbox of this id found (a refill run again after a crash) is reused when unbound; extra ones a crash
   * left are killed. A bound one is refused: a bound machine never goes back to a pool.
   */
  async createIdle(id: string, progress: (step: CreateProgress) => void = () => {}): Promise<BackendHandle> {
    const poolId = parsePoolId(id);
    const { client, timeoutMs, config } = this.sandboxes;
    const poolKey = await this.key();
    let sandbox: Sandbox | null = null;
    for (const found of await this.find(poolId)) {
      // Whose each one is decides, never its age: a bound one stops the create, an unreadable one too.
      const state = await poolState(client, this.sandboxes.poolContext(), found, poolId);
      if (state.state === "bound") throw bound(poolId);
      if (state.state === "unknown") {
        throw new AppError("UNAVAILABLE", `cannot tell whether pool sandbox ${found.sandboxId} is bound`, {
          details: { pool: poolId, sandboxId: found.sandboxId },
        });
      }
      if (!sandbox && found.metadata[METADATA.poolKey] === poolKey) {
        sandbox = await client.connect(found.sandboxId, timeoutMs);
        if (sandbox) progress({ step: "sandbox.reattaching", detail: sandbox.sandboxId });
      } else {
        // Another key's (never bound: not worth keeping), or a duplicate a crashed run left.
        await this.kill(found.sandboxId, poolId);
      }
    }
    if (!sandbox) {
      sandbox = await client.create(poolMetadata(await this.sandboxes.naming(), poolId, poolKey), timeoutMs);
      progress({ step: "sandbox.created", detail: sandbox.sandboxId });
      await checkTemplateSize(client, config, sandbox);
    }
    const live = sandbox;
    const bundle = await gatewayBundle(config);
    const facts = await this.sandboxes.prepare(live, bundle.sandboxPath);
    const { gateway, started } = await ensureGateway(live, this.sandboxes.gatewayContext(), () =>
      Promise.resolve(facts),
    );
    gateway.transport.close(); // the refill does not keep it; whoever attaches opens their own
    progress({ step: started ? "gateway.started" : "gateway.reused", detail: live.sandboxId });
    return { kind: "e2b", pool: poolId, sandboxId: live.sandboxId };
  }

  /**
   * Gives the idle sandbox to the workspace of `spec`: the host binding record, then the root-only marker
   * (O_EXCL: a sandbox bound to someone else refuses atomically). No sandbox is created or resumed.
   * Refused (AppError, the machine left as it was): a tenant with its own E2B team or template
   * (UNPROCESSABLE, `tenant_team`), a workspace that has a sandbox already (CONFLICT, `workspace_has_data`),
   * a pool sandbox gone, paused (expired) or bound to another workspace (CONFLICT).
   */
  async bind(id: string, handle: BackendHandle, spec: WorkspaceSpec): Promise<BackendHandle> {
    const poolId = parsePoolId(id);
    const team = await this.teams.forTenant(spec.tenantId);
    if (team !== this.sandboxes && !sameTeam(team, this.sandboxes)) {
      throw new AppError("UNPROCESSABLE", `tenant ${spec.tenantId} has its own E2B team or template`, {
        details: { reason: "tenant_team", pool: poolId },
      });
    }
    const given = ZIdleHandle.safeParse(handle);
    if (!given.success || given.data.pool !== poolId) {
      throw new AppError("BAD_REQUEST", `handle ${JSON.stringify(handle)} is not pool machine ${poolId}'s`);
    }
    const { sandboxId } = given.data;
    const { client, runtimeDir, timeoutMs, config } = this.sandboxes;
    const info = await client.info(sandboxId);
    if (!info || poolIdOf(info.metadata, await this.sandboxes.naming()) !== poolId) {
      throw unbindable(poolId, "its sandbox is gone");
    }
    if (info.state !== "running") throw unbindable(poolId, "its sandbox expired (paused by E2B)");
    // A sandbox with the workspace's metadata (a cold create that got that far) is its data: the provision
    // then creates the usual way and finds it, instead of a second sandbox shadowing it.
    if ((await client.list(workspaceFilter(await this.sandboxes.naming(), spec))).length > 0) {
      throw new AppError(
        "CONFLICT",
        `workspace ${spec.workspaceId} has a sandbox already: pool machine ${poolId} not bound`,
        {
          details: { pool: poolId, reason: "workspace_has_data" },
        },
      );
    }
    const existing = await readBinding(runtimeDir, sandboxId);
    if (existing && (existing.workspaceId !== spec.workspaceId || existing.tenantId !== spec.tenantId)) {
      throw unbindable(poolId, "it is bound to another workspace");
    }
    const sandbox = await client.connect(sandboxId, timeoutMs);
    if (!sandbox) throw unbindable(poolId, "its sandbox is gone");
    // The record first: a crash after the marker must leave a sandbox listed as the workspace's (reconcile
    // deals with it as with any), never one listed as idle that a workspace holds.
    await writeBinding(runtimeDir, {
      pool: poolId,
      sandboxId,
      workspaceId: spec.workspaceId,
      tenantId: spec.tenantId,
      userId: spec.userId,
      boundAt: new Date().toISOString(),
    });
    const marker = await writeMarker(sandbox, spec, {
      nonce: undefined,
      replace: false,
      requestTimeoutMs: config.requestTimeoutMs,
    }).catch(async (error: unknown) => {
      await removeBinding(runtimeDir, sandboxId);
      throw error;
    });
    if (marker.workspaceId !== spec.workspaceId || marker.tenantId !== spec.tenantId) {
      await removeBinding(runtimeDir, sandboxId);
      throw unbindable(poolId, "it is bound to another workspace");
    }
    const bound: E2bHandle = {
      kind: "e2b",
      sandboxId,
      template: config.template,
      workdir: config.workdir,
      markerNonce: marker.nonce,
      createdAt: new Date().toISOString(),
      resumed: false,
      replaced: null,
      missing: [],
      pool: poolId,
    };
    return bound;
  }

  /**
   * Kills the unbound pool sandbox(es) of `id`. Idempotent. A bound one is left alone (it is a workspace's
   * now, deleted only by `purge`), as is one whose binding cannot be read: the core then drops its row.
   */
  async discard(id: string): Promise<void> {
    const poolId = parsePoolId(id);
    for (const sandbox of await this.find(poolId)) {
      const state = await poolState(this.sandboxes.client, this.sandboxes.poolContext(), sandbox, poolId);
      if (state.state === "idle") await this.kill(sandbox.sandboxId, poolId);
    }
  }

  /**
   * The ids of this installation's unbound pool sandboxes. A running one's E2B timeout is refreshed once
   * half of it is used, so an idle sandbox never expires while the refill (which lists every tick) runs;
   * one E2B paused at its timeout anyway (the workers were down) is resumed by reading its marker
   * (`poolState`), so it is whole again and listed.
   */
  async listIdle(): Promise<string[]> {
    const { client, timeoutMs } = this.sandboxes;
    const naming = await this.sandboxes.naming();
    const ids = new Set<string>();
    for (const sandbox of await client.list(installationMetadata(naming))) {
      const poolId = poolIdOf(sandbox.metadata, naming);
      if (poolId === null) continue;
      const state = await poolState(client, this.sandboxes.poolContext(), sandbox, poolId);
      if (state.state !== "idle") continue;
      ids.add(poolId);
      const left = sandbox.endAt.getTime() - Date.now();
      if (sandbox.state === "running" && left < timeoutMs / 2)
        await client.setTimeout(sandbox.sandboxId, timeoutMs);
    }
    return [...ids];
  }

  /** The pool sandboxes of `id`, oldest first. */
  private async find(poolId: string): Promise<ListedSandbox[]> {
    const naming = await this.sandboxes.naming();
    // Exact-match filter: the key is left out, so machines of every key of this id are found.
    const found = await this.sandboxes.client.list({
      ...installationMetadata(naming),
      [METADATA.pool]: poolId,
    });
    return found.sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime());
  }

  private async kill(sandboxId: string, poolId: string): Promise<void> {
    const { client, runtimeDir } = this.sandboxes;
    const info = await client.info(sandboxId);
    if (info && poolIdOf(info.metadata, await this.sandboxes.naming()) !== poolId) {
      throw new AppError(
        "CONFLICT",
        `sandbox ${sandboxId} is not pool machine ${poolId} of this installation`,
      );
    }
    await client.kill(sandboxId);
    await removeCredentials(runtimeDir, sandboxId);
    await removeBinding(runtimeDir, sandboxId);
  }
}

/** Same E2B team, template and sizes as the installation's: a tenant whose settings change none of them. */
function sameTeam(team: E2bSandboxes, installation: E2bSandboxes): boolean {
  const fields = ["apiKey", "apiUrl", "domain", "template", "minCpuCount", "minMemoryMB"] as const;
  return fields.every((field) => team.config[field] === installation.config[field]);
}

function parsePoolId(id: string): string {
  const parsed = ZPoolId.safeParse(id);
  if (!parsed.success) throw new AppError("BAD_REQUEST", `not a pool machine id: ${JSON.stringify(id)}`);
  return parsed.data;
}

function bound(poolId: string): AppError {
  return new AppError("CONFLICT", `pool machine ${poolId} is bound to a workspace`, {
    details: { pool: poolId },
  });
}

function unbindable(poolId: string, reason: string): AppError {
  return new AppError("CONFLICT", `pool machine ${poolId} cannot be bound: ${reason}`, {
    details: { pool: poolId },
  });
}
