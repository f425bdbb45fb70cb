import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe } from "vitest";
import { BubblewrapMachine } from "@/server/workspace/drivers/bubblewrap/bubblewrap-machine";
import { SandboxedFolders } from "@/server/workspace/drivers/bubblewrap/sandboxed-folders";
import type { TSandboxConfigInput } from "@/server/workspace/drivers/bubblewrap/sandbox-config";
import { probeSandbox } from "@/server/workspace/drivers/bubblewrap/sandbox-probe";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import {
  instantiateDriver,
  type WorkspaceDriver,
  type WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { bubblewrapDriver } from "@/server/workspace/drivers/bubblewrap/driver";
import { ZSandboxConfig } from "@/server/workspace/drivers/bubblewrap/sandbox-config";
import type {
  HostFolderMachines,
  HostFolderMachinesOptions,
} from "@/server/workspace/drivers/host-folder/host-folder-machines";

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
  const folders = sandboxFolders(basedir, sandbox);
  return {
    basedir,
    folders,
    cleanup: () => fs.rm(basedir, { recursive: true, force: true }),
  };
}

/** The bubblewrap driver's folders over `basedir` (test sandbox settings): attach and MCP as one process. */
export function sandboxFolders(basedir: string, sandbox: TSandboxConfigInput = {}): SandboxedFolders {
  return new SandboxedFolders({ basedir, sandbox: { ...TEST_SANDBOX, ...sandbox } });
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
export function hostWorkdirOf(workspace: { machine: unknown; workdir: string }): string {
  return workspace.machine instanceof BubblewrapMachine ? workspace.machine.hostWorkdir : workspace.workdir;
}

/**
 * The `local` driver exactly as the registry builds it (test sandbox settings), optionally with the
 * workers' operations of other host-folder machines over the same folders (tests that count or hold them).
 */
export function sandboxDriver(
  basedir: string,
  options: {
    sandbox?: TSandboxConfigInput;
    machines?: (base: HostFolderMachinesOptions) => HostFolderMachines;
  } = {},
): WorkspaceDriver {
  const config = ZSandboxConfig.parse({ ...TEST_SANDBOX, ...options.sandbox });
  const driver = instantiateDriver(bubblewrapDriver, config, {
    basedir,
    cwd: process.cwd(),
    uid: process.getuid?.() ?? -1,
  });
  if (!options.machines) return driver;
  // The sandboxes of a workspace are found through the runtime root, whichever folders object started them.
  const folders = new SandboxedFolders({ basedir, sandbox: config });
  const machines = options.machines({
    basedir,
    folders,
    stopProcesses: (spec) => folders.stopAll(spec),
    processUsage: (spec) => folders.cgroupUsage(spec),
  });
  return { ...driver, ...machines.operations() };
}

/** The host-folder driver over `basedir` (listing and reaping what a test left there). */
export function hostFolderDriver(basedir: string): WorkspaceDriver {
  return sandboxDriver(basedir);
}
