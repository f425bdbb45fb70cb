import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { bubblewrapDriver } from "@/server/workspace/drivers/bubblewrap/driver";
import { probeSandbox } from "@/server/workspace/drivers/bubblewrap/sandbox-probe";
import {
  instantiateDriver,
  type DriverDefinition,
  type WorkspaceDriver,
  type WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";

/**
 * What the checkpoint benches share: a machine of a real driver (built from its registry definition, as the
 * workers build it), a workspace of n files put into it with one archive, and small timing helpers.
 */
export const MB = 1024 * 1024;
export const TENANT = "bench";

export type BenchMachine = {
  machine: WorkspaceMachine;
  driver: WorkspaceDriver;
  spec: WorkspaceSpec;
  close(): Promise<void>;
};

function specOf(workspaceId: string): WorkspaceSpec {
  return {
    workspaceId,
    tenantId: TENANT,
    userId: "bench",
    agentId: "bench",
    isolation: IsolationPolicy.PER_AGENT,
  };
}

/** A new workspace of `definition` on `config`, created and attached; `close` purges it. */
export async function machineOf<C>(
  definition: DriverDefinition<C>,
  config: C,
  basedir: string,
  extra: Record<string, unknown> = {},
): Promise<BenchMachine> {
  const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1, ...extra };
  const driver = instantiateDriver(definition, config, context);
  const spec = specOf(`ckpt${randomBytes(4).toString("hex")}`);
  const handle = await driver.create(spec);
  const attached = { ...spec, handle };
  const machine = await driver.attach(attached);
  return {
    machine,
    driver,
    spec: attached,
    async close() {
      await machine.close().catch(() => undefined);
      await driver.purge(attached).catch(() => undefined);
      await driver.close?.().catch(() => undefined);
    },
  };
}

/** The `local` driver (bubblewrap) over `basedir`, or null with the reason when bwrap cannot run here. */
export async function localMachine(basedir: string): Promise<BenchMachine | string> {
  const probe = await probeSandbox();
  if (!probe.ok) return `no bubblewrap sandbox (${probe.reason})`;
  const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 };
  const config = bubblewrapDriver.configSchema.parse(bubblewrapDriver.configFromEnv({}, context));
  return machineOf(bubblewrapDriver, config, basedir);
}

/**
 * Writes n files of `bytes` random bytes each under `root` (100 per folder, two levels: like a repository's
 * source tree), returning their relative paths.
 */
export async function writeTree(root: string, files: number, bytes: number): Promise<string[]> {
  const paths: string[] = [];
  const pool = randomBytes(Math.max(bytes * 64, 64 * 1024));
  for (let index = 0; index < files; index++) {
    const folder = Math.floor(index / 100);
    paths.push(`src/g${Math.floor(folder / 100)}/d${folder % 100}/f${index % 100}.dat`);
  }
  const folders = new Set(paths.map((p) => path.dirname(p)));
  for (const folder of folders) await fs.mkdir(path.join(root, folder), { recursive: true });
  for (let start = 0; start < paths.length; start += 256) {
    await Promise.all(
      paths.slice(start, start + 256).map((p, offset) => {
        const index = start + offset;
        // Unique bytes per file (the index up front), the rest from a random pool: no two files dedup.
        const at = (index * 977) % (pool.length - bytes);
        const data = Buffer.concat([Buffer.from(`${index}:`), pool.subarray(at, at + bytes)]).subarray(
          0,
          bytes,
        );
        return fs.writeFile(path.join(root, p), data);
      }),
    );
  }
  return paths;
}

/** A host folder as an uncompressed tar stream (system tar; `.` as its top). */
export function tarOf(dir: string): Readable {
  const child = spawn("tar", ["-C", dir, "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] });
  return child.stdout;
}

/** Runs a command to completion; rejects on a non-zero exit. */
export function spawnOk(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} ${args.join(" ")}: ${code} ${stderr}`)),
    );
  });
}

/** Milliseconds one call takes. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/**
 * The least a capture of k changed files can do on this machine: a stat walk of the workdir (one `find`
 * through `exec`) and the k files copied out of the machine into host files.
 */
export async function bareWalkAndCopy(
  machine: WorkspaceMachine,
  changed: readonly string[],
  into: string,
): Promise<number> {
  return timed(async () => {
    // find's own stat walk, its output read and dropped (the capture also parses it and builds trees).
    const walk = await machine.exec(["find", ".", "-printf", "%y %m %s %T@ %P %l\\0"], {
      cwd: machine.workdir,
      onStdout: () => undefined,
      maxBufferBytes: 1,
    });
    if (walk.exitCode !== 0) throw new Error(`find failed: ${walk.stderr.toString()}`);
    for (const [index, file] of changed.entries()) {
      const data = await machine.readFile(file);
      await fs.writeFile(path.join(into, `copy-${index}`), data);
    }
  });
}

/** Sum of the sizes of every file under `dir`, and the disk space they use (blocks). */
export async function folderBytes(dir: string): Promise<{ bytes: number; disk: number }> {
  let bytes = 0;
  let disk = 0;
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const stat = await fs.stat(path.join(entry.parentPath, entry.name));
    bytes += stat.size;
    disk += stat.blocks * 512;
  }
  return { bytes, disk };
}

/** A temp folder the sandboxes' users may traverse (search only): workspaces' basedirs go inside. */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
  await fs.chmod(dir, 0o711);
  return dir;
}
