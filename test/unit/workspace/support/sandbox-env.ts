import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe } from "vitest";
import { BubblewrapBackend } from "@/server/workspace/backends/bubblewrap/bubblewrap-backend";
import { BubblewrapBackendProvider } from "@/server/workspace/backends/bubblewrap/bubblewrap-provider";
import type { TSandboxConfigInput } from "@/server/workspace/backends/bubblewrap/sandbox-config";
import { probeSandbox } from "@/server/workspace/backends/bubblewrap/sandbox-probe";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import type { MachineController, WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/backend/driver";
import { bubblewrapDriver } from "@/server/workspace/backends/bubblewrap/driver";
import { ZSandboxConfig } from "@/server/workspace/backends/bubblewrap/sandbox-config";
import type { LocalMachineOptions } from "@/server/workspace/backends/local/local-machine";

/**
 * Decides whether the sandbox suites run: a real bubblewrap sandbox must start. In CI (`CI` set) a
 * missing or broken bwrap FAILS the suite loudly (.ci/run installs `bubblewrap`); elsewhere the suite is
 * skipped with the reason printed.
 */
const probe = await probeSandbox();
const skipReason = probe.ok ? null : `${probe.reason}. ${probe.hint}`;
if (skipReason && process.env.CI) throw new Error(`[sandbox tests] CI requires bubblewrap: ${skipReason}`);
if (skipReason) console.warn(`[sandbox tests] SKIPPED: ${skipReason}`);

export const describeSandbox = skipReason ? describe.skip : describe;

/** What tests' stdio MCP servers need to see (the npm packages they run from), read-only. */
export const TEST_SANDBOX: TSandboxConfigInput = { readOnlyPaths: [path.resolve("node_modules")] };

export function specOf(workspaceId: string, owner: Partial<WorkspaceSpec> = {}): WorkspaceSpec {
  return {
    workspaceId,
    tenantId: "tenant-a",
    userId: "user-a",
    agentId: "agent-a",
    isolation: IsolationPolicy.PER_AGENT,
    ...owner,
  };
}

export async function sandboxTestbed(sandbox: TSandboxConfigInput = {}) {
  const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-sandbox-test-")));
  const provider = new BubblewrapBackendProvider({ basedir, sandbox: { ...TEST_SANDBOX, ...sandbox } });
  return {
    basedir,
    provider,
    cleanup: () => fs.rm(basedir, { recursive: true, force: true }),
  };
}

/** Host pids whose command line contains `needle` (what `ps | grep` would find), of `uid` when given. */
export async function hostProcessesMatching(needle: string, uid?: number): Promise<number[]> {
  const found: number[] = [];
  for (const name of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const cmdline = await fs.readFile(`/proc/${name}/cmdline`, "utf8").catch(() => "");
    if (!cmdline.replaceAll("\0", " ").includes(needle)) continue;
    if (uid !== undefined && (await uidOf(Number(name))) !== uid) continue;
    found.push(Number(name));
  }
  return found;
}

async function uidOf(pid: number): Promise<number | null> {
  const status = await fs.readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
  const match = /^Uid:\s+(\d+)/m.exec(status);
  return match ? Number(match[1]) : null;
}

/** Host pids owned by `uid` (real uid), zombies included. */
export async function hostProcessesOfUid(uid: number): Promise<number[]> {
  const found: number[] = [];
  for (const name of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const status = await fs.readFile(`/proc/${name}/status`, "utf8").catch(() => "");
    const match = /^Uid:\s+(\d+)/m.exec(status);
    if (match && Number(match[1]) === uid) found.push(Number(name));
  }
  return found;
}

/** Polls `check` until it holds or the deadline passes; returns its last answer. */
export async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    value = await read();
  }
  return value;
}

/** Where a workspace's files are on the host (sandboxed backends show them at /workspace). */
export function hostWorkdirOf(workspace: { backend: unknown; workdir: string }): string {
  return workspace.backend instanceof BubblewrapBackend ? workspace.backend.hostWorkdir : workspace.workdir;
}

/**
 * The `local` driver exactly as the registry builds it (test sandbox settings), optionally with another
 * machine controller over the same provider (tests that count or hold provisions).
 */
export function sandboxDriver(
  basedir: string,
  options: {
    sandbox?: TSandboxConfigInput;
    machine?: (base: LocalMachineOptions) => MachineController;
  } = {},
): WorkspaceDriver {
  const config = ZSandboxConfig.parse({ ...TEST_SANDBOX, ...options.sandbox });
  const driver = bubblewrapDriver.create(config, {
    basedir,
    cwd: process.cwd(),
    uid: process.getuid?.() ?? -1,
  });
  if (!options.machine) return driver;
  const provider = driver.provider as BubblewrapBackendProvider;
  const machine = options.machine({
    basedir,
    provider,
    stopProcesses: (spec) => provider.stopAll(spec),
    processUsage: (spec) => provider.cgroupUsage(spec),
  });
  return { ...driver, machine };
}

/** A host-folder machine over `basedir` (listing and reaping what a test left there). */
export function hostFolderMachine(basedir: string): MachineController {
  return sandboxDriver(basedir).machine;
}
