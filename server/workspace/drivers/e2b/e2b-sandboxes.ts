import { installationIdOf, type InstallationIdSource } from "@/server/workspace/drivers/installation";
import type { Sandbox } from "e2b";
import { AppError } from "@/server/shared/errors";
import type { MachineUsage } from "@/server/workspace/drivers/machine-usage";
import type {
  DriverContext,
  MachineResource,
  CreateProgress,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { E2bMachine } from "./e2b-machine";
import { E2bClient, type ListedSandbox } from "./e2b-client";
import { runtimeDirOf, sandboxTimeoutMs, type E2bDriverConfig } from "./e2b-config";
import { ensureGateway, gatewayBundle, removeCredentials } from "./e2b-gateway";
import { SandboxKeepAlive } from "./e2b-keepalive";
import {
  belongsTo,
  installationMetadata,
  isLegacyOf,
  METADATA,
  parseHandle,
  poolIdOf,
  workspaceFilter,
  workspaceMetadata,
  type SandboxNaming,
  type E2bHandle,
} from "./e2b-naming";
import { checkTemplateSize, prepareSandbox, writeMarker, type SandboxFacts } from "./e2b-prepare";
import { boundPoolSandbox, poolState, removeBinding } from "./e2b-pool-bindings";

type Progress = (progress: CreateProgress) => void;

/** The sandbox every process agrees on when several exist: the one E2B started first (then by id). */
function oldest(sandboxes: readonly ListedSandbox[]): ListedSandbox | undefined {
  return [...sandboxes].sort(
    (a, b) => a.startedAt.getTime() - b.startedAt.getTime() || a.sandboxId.localeCompare(b.sandboxId),
  )[0];
}

/**
 * One workspace ↔ one sandbox. Workers `create` (find by handle or metadata, resume, or create; verify;
 * gateway); every process `attach`es (never creates). Two provisions racing to create both re-list by
 * metadata right after creating, agree on the oldest sandbox and the loser kills its own. That is sound
 * because a sandbox is listed from the moment its `startedAt` is set: whoever creates later sees the
 * earlier one. (BullMQ's job id = workspace id already makes such races rare; this is the second line.)
 */
/** How far back a usage read looks for E2B's latest metrics point (it collects one every few seconds). */
const USAGE_LOOKBACK_MS = 60_000;

export class E2bSandboxes {
  readonly client: E2bClient;
  readonly runtimeDir: string;
  readonly timeoutMs: number;
  private readonly installationId: InstallationIdSource;

  constructor(
    readonly config: E2bDriverConfig,
    context: DriverContext,
  ) {
    this.client = new E2bClient(config);
    this.runtimeDir = runtimeDirOf(config, context);
    this.timeoutMs = sandboxTimeoutMs(config);
    // Configured explicitly, BERTH_E2B_INSTALLATION wins (and no database lookup is needed).
    const configured = config.installation;
    this.installationId = configured
      ? () => Promise.resolve(configured)
      : installationIdOf(context.installationId);
  }

  /** Whose sandboxes this driver makes, lists and reaps (see SandboxNaming). */
  async naming(): Promise<SandboxNaming> {
    return {
      installation: await this.installationId(),
      acceptLegacy: this.config.installation === undefined,
    };
  }

  async create(spec: WorkspaceSpec, progress: Progress = () => undefined): Promise<E2bHandle> {
    const previous = parseHandle(spec.handle);
    const located = await this.locate(spec);
    let replaced: E2bHandle["replaced"] = null;
    if (previous && located.handleState !== "ok") {
      replaced = {
        previousSandboxId: previous.sandboxId,
        reason: located.handleState === "foreign" ? "foreign" : "not_found",
      };
      progress({
        step: "sandbox.lost",
        dataLost: true,
        detail: `sandbox ${previous.sandboxId} ${located.handleState === "foreign" ? "belongs to another workspace" : "no longer exists at E2B"}: the workspace's files in it are lost`,
      });
    }
    for (const duplicate of located.duplicates) {
      await this.client.kill(duplicate.sandboxId);
      await removeCredentials(this.runtimeDir, duplicate.sandboxId);
      progress({ step: "sandbox.duplicate-killed", detail: duplicate.sandboxId });
    }

    let sandbox: Sandbox | null = null;
    let resumed = false;
    if (located.sandbox) {
      resumed = located.sandbox.state === "paused";
      progress({
        step: resumed ? "sandbox.resuming" : "sandbox.reattaching",
        detail: located.sandbox.sandboxId,
      });
      sandbox = await this.client.connect(located.sandbox.sandboxId, this.timeoutMs);
    }
    let fresh = false;
    if (!sandbox) {
      ({ sandbox, fresh } = await this.createWinning(spec, progress));
    }

    const bundle = await gatewayBundle(this.config);
    const facts = await this.prepare(sandbox, bundle.sandboxPath);
    // Missing state is only a loss when this sandbox had it: the handle says Berth prepared it before.
    const expected = !fresh && previous?.sandboxId === sandbox.sandboxId;
    const missing: string[] = [];
    if (
      expected &&
      (facts.marker?.nonce !== previous.markerNonce || facts.marker.workspaceId !== spec.workspaceId)
    ) {
      missing.push("marker");
    }
    if (expected && !facts.workdirExisted) missing.push("workdir");
    if (missing.length > 0) {
      progress({
        step: "workspace.verify-failed",
        dataLost: true,
        detail: `sandbox ${sandbox.sandboxId} ${resumed ? "resumed" : "reattached"} without its ${missing.join(" and ")}: the workspace's files did not survive`,
      });
    }
    const { nonce: markerNonce } = await writeMarker(sandbox, spec, {
      nonce: fresh ? undefined : previous?.markerNonce,
      replace: missing.includes("marker"),
      requestTimeoutMs: this.config.requestTimeoutMs,
    });
    const { gateway, started } = await ensureGateway(sandbox, this.gatewayContext(), () =>
      Promise.resolve(facts),
    );
    gateway.transport.close(); // the worker does not keep it; attaching processes open their own
    progress({ step: started ? "gateway.started" : "gateway.reused", detail: sandbox.sandboxId });
    await this.client.setTimeout(sandbox.sandboxId, this.timeoutMs);
    return {
      kind: "e2b",
      sandboxId: sandbox.sandboxId,
      template: this.config.template,
      workdir: this.config.workdir,
      markerNonce,
      createdAt: new Date().toISOString(),
      resumed,
      replaced,
      missing,
      // Still the pool machine bind gave the workspace: later operations keep following the handle to it.
      ...(previous?.pool !== undefined && previous.sandboxId === sandbox.sandboxId
        ? { pool: previous.pool }
        : {}),
    };
  }

  /** Attaches to the workspace's provisioned sandbox (resuming it if E2B paused it). Never creates one. */
  async attach(spec: WorkspaceSpec): Promise<E2bMachine> {
    const handle = parseHandle(spec.handle);
    const sandboxId =
      handle?.sandboxId ??
      oldest(await this.client.list(workspaceFilter(await this.naming(), spec)))?.sandboxId;
    const sandbox = sandboxId ? await this.client.connect(sandboxId, this.timeoutMs) : null;
    if (!sandbox) {
      throw new AppError("UNAVAILABLE", `The E2B sandbox of workspace ${spec.workspaceId} is gone`, {
        userMessage: "The workspace's sandbox is gone; it is provisioned again on the next use",
        details: { reason: "sandbox_missing", sandboxId: sandboxId ?? null },
      });
    }
    const bundle = await gatewayBundle(this.config);
    const { gateway } = await ensureGateway(sandbox, this.gatewayContext(), () =>
      this.prepare(sandbox, bundle.sandboxPath),
    );
    const keepAlive = new SandboxKeepAlive(
      (ms) => this.client.setTimeout(sandbox.sandboxId, ms),
      this.timeoutMs,
    );
    return new E2bMachine(sandbox, this.config, keepAlive, gateway, this.client);
  }

  /** Pauses the workspace's sandbox(es): files (and memory, when configured) kept. */
  async stop(spec: WorkspaceSpec): Promise<void> {
    for (const sandboxId of await this.sandboxIdsOf(spec)) await this.client.pause(sandboxId);
  }

  async purge(spec: WorkspaceSpec): Promise<string[]> {
    const removed: string[] = [];
    for (const sandboxId of await this.sandboxIdsOf(spec)) {
      if (await this.client.kill(sandboxId)) removed.push(`sandbox:${sandboxId}`);
      await removeCredentials(this.runtimeDir, sandboxId);
      await removeBinding(this.runtimeDir, sandboxId);
    }
    return removed;
  }

  /**
   * The latest point of E2B's sandbox metrics (collected every few seconds while it runs): `cpuUsedPct` is
   * the busy share of all its CPUs, so times `cpuCount` it is percent of one core; memory used (page cache
   * not counted); the root filesystem's used bytes (the template's system included, as `df /` counts it).
   * E2B reports no process count. Null when no sandbox runs; null figures before its first point.
   */
  async usage(spec: WorkspaceSpec): Promise<MachineUsage | null> {
    const { sandbox } = await this.locate(spec);
    if (!sandbox || sandbox.state !== "running") return null;
    const points = await this.client.metrics(sandbox.sandboxId, new Date(Date.now() - USAGE_LOOKBACK_MS));
    if (points === null) return null;
    const latest = points.reduce<(typeof points)[number] | undefined>(
      (newest, point) => (!newest || point.timestamp > newest.timestamp ? point : newest),
      undefined,
    );
    return {
      cpuSeconds: null,
      cpuPercent: latest ? Math.round(latest.cpuUsedPct * latest.cpuCount * 1_000) / 1_000 : null,
      memoryBytes: latest?.memUsed ?? null,
      diskBytes: latest?.diskUsed ?? null,
      processes: null,
    };
  }

  async exists(spec: WorkspaceSpec): Promise<boolean> {
    return (await this.sandboxIdsOf(spec)).length > 0;
  }

  /**
   * Every sandbox of this installation in this team. Warm pool machines carry no workspace metadata: an
   * idle one is the pool's (never listed, so never reaped as an orphan), a bound one is listed as its
   * workspace's (e2b-pool-bindings.ts), one whose binding cannot be read is left out.
   */
  async listResources(): Promise<MachineResource[]> {
    const naming = await this.naming();
    const resources: MachineResource[] = [];
    for (const sandbox of await this.client.list(installationMetadata(naming))) {
      const poolId = poolIdOf(sandbox.metadata, naming);
      if (poolId === null) {
        resources.push({
          workspaceId: sandbox.metadata[METADATA.workspace] ?? null,
          tenantId: sandbox.metadata[METADATA.tenant] ?? null,
          locator: sandbox.sandboxId,
        });
        continue;
      }
      const state = await poolState(this.client, this.poolContext(), sandbox, poolId);
      if (state.state !== "bound") continue;
      resources.push({
        workspaceId: state.workspaceId,
        tenantId: state.tenantId,
        locator: sandbox.sandboxId,
      });
    }
    return resources;
  }

  async reap(resource: MachineResource): Promise<void> {
    const info = await this.client.info(resource.locator);
    if (!info) return;
    const ours = Object.entries(installationMetadata(await this.naming())).every(
      ([key, value]) => info.metadata[key] === value,
    );
    if (!ours)
      throw new AppError(
        "BAD_REQUEST",
        `refusing to reap ${resource.locator}: not a sandbox of this Berth installation`,
      );
    // A pool machine is reaped only once bound (a workspace's); an idle one is the pool's to discard.
    const poolId = poolIdOf(info.metadata, await this.naming());
    if (poolId !== null && (await poolState(this.client, this.poolContext(), info, poolId)).state !== "bound")
      throw new AppError("BAD_REQUEST", `refusing to reap ${resource.locator}: an unbound pool machine`);
    await this.client.kill(resource.locator);
    await removeCredentials(this.runtimeDir, resource.locator);
    await removeBinding(this.runtimeDir, resource.locator);
  }

  /**
   * The sandbox to use: the stored handle's when E2B still has it and it is this workspace's, else the
   * oldest with the workspace's metadata. Younger ones are duplicates a crashed race left behind.
   */
  private async locate(spec: WorkspaceSpec): Promise<{
    sandbox: ListedSandbox | null;
    duplicates: ListedSandbox[];
    handleState: "ok" | "gone" | "foreign" | "none";
  }> {
    const handle = parseHandle(spec.handle);
    const listed = await this.client.list(workspaceFilter(await this.naming(), spec));
    let handleState: "ok" | "gone" | "foreign" | "none" = "none";
    let chosen: ListedSandbox | undefined;
    if (handle?.pool !== undefined) {
      // A pool machine's metadata names no workspace: only the handle leads to it.
      const found = await this.boundPoolSandbox(handle, spec);
      chosen = found.sandbox ?? undefined;
      handleState = found.state;
    } else if (handle) {
      chosen = listed.find((sandbox) => sandbox.sandboxId === handle.sandboxId);
      if (chosen) handleState = "ok";
      else {
        const info = await this.client.info(handle.sandboxId);
        const naming = await this.naming();
        if (info && isLegacyOf(info.metadata, naming) && belongsTo(info.metadata, naming, spec)) {
          // Made before installation ids (metadata cannot change): still this workspace's, by its handle.
          chosen = info;
          handleState = "ok";
        } else handleState = info && !belongsTo(info.metadata, naming, spec) ? "foreign" : "gone";
      }
    }
    chosen ??= oldest(listed);
    return {
      sandbox: chosen ?? null,
      duplicates: listed.filter((sandbox) => sandbox.sandboxId !== chosen?.sandboxId),
      handleState,
    };
  }

  private async createWinning(
    spec: WorkspaceSpec,
    progress: Progress,
  ): Promise<{ sandbox: Sandbox; fresh: boolean }> {
    for (let attempt = 1; ; attempt++) {
      const mine = await this.client.create(workspaceMetadata(await this.naming(), spec), this.timeoutMs);
      progress({ step: "sandbox.created", detail: mine.sandboxId });
      await checkTemplateSize(this.client, this.config, mine);
      const winner = oldest(await this.client.list(workspaceFilter(await this.naming(), spec)));
      if (!winner || winner.sandboxId === mine.sandboxId) return { sandbox: mine, fresh: true };
      await this.client.kill(mine.sandboxId);
      progress({
        step: "sandbox.race-lost",
        detail: `${mine.sandboxId} killed; ${winner.sandboxId} is the workspace's`,
      });
      const other = await this.client.connect(winner.sandboxId, this.timeoutMs);
      if (other) return { sandbox: other, fresh: true };
      if (attempt >= 3)
        throw new AppError("UNAVAILABLE", `could not settle on one sandbox for ${spec.workspaceId}`);
    }
  }

  prepare(sandbox: Sandbox, bundlePath: string): Promise<SandboxFacts> {
    return prepareSandbox(sandbox, {
      user: this.config.user,
      workdir: this.config.workdir,
      bundlePath,
      requestTimeoutMs: this.config.requestTimeoutMs,
      timeoutMs: 60_000,
    });
  }

  private async sandboxIdsOf(spec: WorkspaceSpec): Promise<string[]> {
    const ids = new Set(
      (await this.client.list(workspaceFilter(await this.naming(), spec))).map(
        (sandbox) => sandbox.sandboxId,
      ),
    );
    const handle = parseHandle(spec.handle);
    if (handle?.pool !== undefined) {
      const found = await this.boundPoolSandbox(handle, spec);
      if (found.sandbox) ids.add(found.sandbox.sandboxId);
    } else if (handle && !ids.has(handle.sandboxId)) {
      const info = await this.client.info(handle.sandboxId);
      if (info && belongsTo(info.metadata, await this.naming(), spec)) ids.add(handle.sandboxId);
    }
    return [...ids];
  }

  gatewayContext() {
    return { config: this.config, runtimeDir: this.runtimeDir };
  }

  /** What reading a pool machine's binding needs (e2b-pool-bindings.ts). */
  poolContext() {
    return {
      runtimeDir: this.runtimeDir,
      timeoutMs: this.timeoutMs,
      requestTimeoutMs: this.config.requestTimeoutMs,
    };
  }

  /** The pool sandbox a pooled handle names, if it is still this workspace's (else gone or foreign). */
  private async boundPoolSandbox(handle: E2bHandle, spec: WorkspaceSpec) {
    const pool = handle.pool ?? "";
    return boundPoolSandbox(this.client, this.runtimeDir, await this.naming(), { ...handle, pool }, spec);
  }
}
