import { installationIdOf, type InstallationIdSource } from "@/server/workspace/drivers/installation";
import { randomBytes } from "node:crypto";
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
import { runChore } from "./e2b-commands";
import { runtimeDirOf, sandboxTimeoutMs, type E2bDriverConfig } from "./e2b-config";
import { ensureGateway, gatewayBundle, removeCredentials } from "./e2b-gateway";
import { SandboxKeepAlive } from "./e2b-keepalive";
import {
  belongsTo,
  installationMetadata,
  isLegacyOf,
  METADATA,
  parseHandle,
  SANDBOX_PATHS,
  workspaceFilter,
  workspaceMetadata,
  type SandboxNaming,
  ZMarker,
  type E2bHandle,
} from "./e2b-naming";
import { prepareSandbox, type SandboxFacts } from "./e2b-prepare";

type Progress = (progress: CreateProgress) => void;

/** The sandbox every process agrees on when several exist: the one E2B started first (then by id). */
function oldest(sandboxes: readonly ListedSandbox[]): ListedSandbox | undefined {
  return [...sandboxes].sort(
    (a, b) => a.startedAt.getTime() - b.startedAt.getTime() || a.sandboxId.localeCompare(b.sandboxId),
  )[0];
}

/**
 * $1 marker JSON, $2 "replace" to drop the old one first. Writes the marker only when there is none
 * (noclobber: O_EXCL, so two racing provisions agree on one) and prints the marker that is in place.
 */
const WRITE_MARKER = [
  `[ "$2" = replace ] && rm -f ${SANDBOX_PATHS.marker}`,
  `(set -C; printf '%s' "$1" > ${SANDBOX_PATHS.marker}) 2>/dev/null`,
  `cat ${SANDBOX_PATHS.marker}`,
].join("\n");

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
  private async naming(): Promise<SandboxNaming> {
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
    const markerNonce = await this.writeMarker(
      sandbox,
      spec,
      fresh ? undefined : previous?.markerNonce,
      missing.includes("marker"),
    );
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

  async listResources(): Promise<MachineResource[]> {
    return (await this.client.list(installationMetadata(await this.naming()))).map((sandbox) => ({
      workspaceId: sandbox.metadata[METADATA.workspace] ?? null,
      tenantId: sandbox.metadata[METADATA.tenant] ?? null,
      locator: sandbox.sandboxId,
    }));
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
    await this.client.kill(resource.locator);
    await removeCredentials(this.runtimeDir, resource.locator);
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
    if (handle) {
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
      await this.checkResources(mine);
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

  /** E2B sizes sandboxes by template: refuse one smaller than configured, with the fix in the message. */
  private async checkResources(sandbox: Sandbox): Promise<void> {
    const { minCpuCount, minMemoryMB, template } = this.config;
    if (minCpuCount === undefined && minMemoryMB === undefined) return;
    const info = await this.client.info(sandbox.sandboxId);
    if (!info) return;
    const short =
      (minCpuCount !== undefined && info.cpuCount < minCpuCount) ||
      (minMemoryMB !== undefined && info.memoryMB < minMemoryMB);
    if (!short) return;
    await this.client.kill(sandbox.sandboxId);
    throw new AppError(
      "UNPROCESSABLE",
      `E2B template ${template} gives ${info.cpuCount} vCPU / ${info.memoryMB} MB, below BERTH_E2B_CPU_COUNT=${minCpuCount ?? "-"} / BERTH_E2B_MEMORY_MB=${minMemoryMB ?? "-"}: build a bigger template (e2b template build --cpu-count --memory-mb) and set BERTH_E2B_TEMPLATE`,
    );
  }

  private prepare(sandbox: Sandbox, bundlePath: string): Promise<SandboxFacts> {
    return prepareSandbox(sandbox, {
      user: this.config.user,
      workdir: this.config.workdir,
      bundlePath,
      requestTimeoutMs: this.config.requestTimeoutMs,
      timeoutMs: 60_000,
    });
  }

  /** The marker's nonce after this provision (the one already in place wins, unless it is replaced). */
  private async writeMarker(
    sandbox: Sandbox,
    spec: WorkspaceSpec,
    nonce: string | undefined,
    replace: boolean,
  ): Promise<string> {
    const marker = {
      workspaceId: spec.workspaceId,
      tenantId: spec.tenantId,
      nonce: nonce ?? randomBytes(12).toString("hex"),
    };
    const result = await runChore(
      sandbox,
      WRITE_MARKER,
      [JSON.stringify(marker), replace ? "replace" : "keep"],
      {
        user: "root",
        timeoutMs: 30_000,
        requestTimeoutMs: this.config.requestTimeoutMs,
      },
    );
    try {
      return ZMarker.parse(JSON.parse(result.stdout)).nonce;
    } catch {
      throw new AppError("INTERNAL", `could not write the workspace marker: ${result.stderr.trim()}`, {
        details: { sandboxId: sandbox.sandboxId },
      });
    }
  }

  private async sandboxIdsOf(spec: WorkspaceSpec): Promise<string[]> {
    const ids = new Set(
      (await this.client.list(workspaceFilter(await this.naming(), spec))).map(
        (sandbox) => sandbox.sandboxId,
      ),
    );
    const handle = parseHandle(spec.handle);
    if (handle && !ids.has(handle.sandboxId)) {
      const info = await this.client.info(handle.sandboxId);
      if (info && belongsTo(info.metadata, await this.naming(), spec)) ids.add(handle.sandboxId);
    }
    return [...ids];
  }

  private gatewayContext() {
    return { config: this.config, runtimeDir: this.runtimeDir };
  }
}
