import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import Docker from "dockerode";
import { describe } from "vitest";
import {
  DockerWorkspaceProvider,
  type DockerWorkspaceHandle,
} from "@/server/workspace/backends/docker/docker-provider";
import type {
  DockerWorkspaceRef,
  TDockerProviderConfigInput,
} from "@/server/workspace/backends/docker/docker-config";

const execFileAsync = promisify(execFile);

/**
 * Decides whether the Docker suites run: engine reachable and base image present → run. Otherwise: in
 * CI (`CI` set) the suite FAILS loudly, because CI is supposed to have started the engine
 * (scripts/docker/ensure-engine.sh) and built the image (scripts/docker/build-base-image.sh); elsewhere
 * it is skipped with the reason printed.
 */
export const SOCKET_PATH = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
export const BASE_IMAGE = process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm";

async function probe(): Promise<string | null> {
  const docker = new Docker({ socketPath: SOCKET_PATH });
  try {
    await docker.ping();
  } catch (error) {
    return `no Docker engine at ${SOCKET_PATH} (${String(error)}); start one with scripts/docker/ensure-engine.sh`;
  }
  try {
    await docker.getImage(BASE_IMAGE).inspect();
  } catch {
    return `base image ${BASE_IMAGE} is missing; build it with scripts/docker/build-base-image.sh`;
  }
  return null;
}

const skipReason = await probe();
if (skipReason && process.env.CI) {
  throw new Error(`[docker tests] CI requires a Docker engine: ${skipReason}`);
}
if (skipReason) console.warn(`[docker tests] SKIPPED: ${skipReason}`);

/** `describe` when the engine is usable, `describe.skip` (with the reason printed above) otherwise. */
export const describeDocker = skipReason ? describe.skip : describe;
export const dockerSkipReason = skipReason;

export function uniqueWorkspaceId(prefix = "t"): string {
  return `${prefix}${randomBytes(6).toString("hex")}`;
}

export const TEST_OWNER = { tenantId: "tenant-test", userId: "user-test", agentId: "agent-test" };

/** A throwaway data root plus a provider factory; `cleanup` purges every workspace it opened. */
export async function createDockerTestbed(overrides: Partial<TDockerProviderConfigInput> = {}) {
  const dataRoot = await fs.mkdtemp(path.join(os.tmpdir(), "berth-docker-test-"));
  const runtimeRoot = path.join("/tmp", `berth-rt-${randomBytes(3).toString("hex")}`);
  const config: TDockerProviderConfigInput = {
    socketPath: SOCKET_PATH,
    baseImage: BASE_IMAGE,
    dataRoot,
    runtimeRoot,
    memoryBytes: 512 * 1024 * 1024,
    pidsLimit: 256,
    cpus: 1,
    stopTimeoutSeconds: 1,
    ...overrides,
  };
  const opened: DockerWorkspaceRef[] = [];
  const providers: DockerWorkspaceProvider[] = [];
  const newProvider = (extra: Partial<TDockerProviderConfigInput> = {}) => {
    const provider = new DockerWorkspaceProvider({ ...config, ...extra });
    providers.push(provider);
    return provider;
  };
  const refFor = (workspaceId = uniqueWorkspaceId()): DockerWorkspaceRef => ({
    tenantId: TEST_OWNER.tenantId,
    userId: TEST_OWNER.userId,
    workspaceId,
  });
  const open = async (
    provider: DockerWorkspaceProvider,
    ref: DockerWorkspaceRef = refFor(),
  ): Promise<DockerWorkspaceHandle> => {
    if (!opened.some((known) => known.workspaceId === ref.workspaceId && known.tenantId === ref.tenantId)) {
      opened.push(ref);
    }
    return provider.open({ ...ref, agentId: TEST_OWNER.agentId });
  };
  /** Marks a workspace opened some other way (e.g. through WorkspaceManager) for cleanup. */
  const track = (ref: DockerWorkspaceRef) => opened.push(ref);
  const cleanup = async () => {
    const provider = providers[0] ?? newProvider();
    for (const ref of opened) await provider.purge(ref).catch(() => undefined);
    await fs.rm(dataRoot, { recursive: true, force: true });
    await fs.rm(runtimeRoot, { recursive: true, force: true });
  };
  return {
    config,
    dataRoot,
    newProvider,
    open,
    refFor,
    track,
    cleanup,
    docker: new Docker({ socketPath: SOCKET_PATH }),
  };
}

/**
 * Copies an installed npm package and its whole production dependency closure (resolved the way Node
 * would from the package's own folder) into `targetRoot/node_modules`, so it runs inside a container
 * with no network. Returns the package's folder inside `targetRoot`.
 */
export async function copyPackageClosure(packageName: string, targetRoot: string): Promise<string> {
  const repoRoot = process.cwd();
  const seen = new Set<string>();
  const queue: Array<{ name: string; from: string }> = [{ name: packageName, from: repoRoot }];
  while (queue.length > 0) {
    const { name, from } = queue.shift()!;
    const dir = await resolvePackageDir(name, from, repoRoot);
    if (seen.has(dir)) continue;
    seen.add(dir);
    const manifest = JSON.parse(await fs.readFile(path.join(dir, "package.json"), "utf8")) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const dep of Object.keys(manifest.dependencies ?? {})) queue.push({ name: dep, from: dir });
  }
  // Outer packages first: a nested node_modules comes along with its parent and is then skipped.
  const dirs = [...seen].sort((a, b) => a.length - b.length);
  const copied: string[] = [];
  for (const dir of dirs) {
    if (copied.some((parent) => dir.startsWith(`${parent}${path.sep}`))) continue;
    const target = path.join(targetRoot, path.relative(repoRoot, dir));
    await fs.mkdir(path.dirname(target), { recursive: true });
    // cp(1) is an order of magnitude faster than fs.cp for thousands of small files.
    await execFileAsync("cp", ["-RL", dir, target]);
    copied.push(dir);
  }
  return path.join(targetRoot, "node_modules", packageName);
}

async function resolvePackageDir(name: string, from: string, stopAt: string): Promise<string> {
  let dir = from;
  for (;;) {
    const candidate = path.join(dir, "node_modules", name);
    try {
      await fs.access(path.join(candidate, "package.json"));
      return candidate;
    } catch {
      if (dir === stopAt || dir === path.dirname(dir)) throw new Error(`cannot resolve ${name} from ${from}`);
      dir = path.dirname(dir);
    }
  }
}
