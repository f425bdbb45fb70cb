import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { ZMcpDeclaration, type TMcpDeclaration } from "@/server/workspace/mcp/types";
import { copyPackageClosure } from "../docker/support/docker-env";

export async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function textOf(stream: Readable): Promise<string> {
  return (await bytesOf(stream)).toString("utf8");
}

export function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Hash and size of a stream, without holding it. */
export async function digestOf(stream: Readable): Promise<{ sha: string; size: number }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { sha: hash.digest("hex"), size };
}

/** Polls `read` until `done` holds or the deadline passes; returns the last value (the caller asserts it). */
export async function pollUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    value = await read();
  }
  return value;
}

export function uniqueId(prefix: string): string {
  return `${prefix}${randomBytes(5).toString("hex")}`;
}

/**
 * `@modelcontextprotocol/server-everything` with its dependency closure, copied from node_modules into a
 * host folder once per suite: every backend gets it through `putArchive`, so the MCP server runs where the
 * backend runs agent commands (a sandbox, a container, a remote sandbox) with the image's own `node`.
 */
export type EverythingFixture = {
  /** Puts the package into the workspace (once per workspace) and returns a stateful stdio declaration of it. */
  install(backend: WorkspaceMachine, name: string): Promise<TMcpDeclaration>;
  cleanup(): Promise<void>;
};

/** Written after the closure is extracted: a workspace that has it has the whole closure. */
const INSTALLED_MARKER = ".fixtures/.everything-installed";

export async function everythingFixture(): Promise<EverythingFixture> {
  const host = await fs.mkdtemp(path.join(os.tmpdir(), "berth-contract-mcp-"));
  const packageDir = await copyPackageClosure("@modelcontextprotocol/server-everything", host);
  return {
    async install(backend, name) {
      // Each case attaches a machine of its own to the suite's one workspace: the closure (32 MB, some 4,000
      // files) went in again for every one of them; the files stay in the workspace, so once is enough.
      if (!(await backend.stat(INSTALLED_MARKER))) {
        await backend.putArchive(".fixtures", tarOf(host));
        await backend.writeFile(INSTALLED_MARKER, "");
      }
      const script = path.posix.join(
        backend.workdir,
        ".fixtures",
        path.relative(host, packageDir),
        "dist/index.js",
      );
      return ZMcpDeclaration.parse({
        name,
        is_stateful: true,
        mcp_config: { type: "stdio_mcp", command: "node", args: [script, "stdio"] },
      });
    },
    cleanup: () => fs.rm(host, { recursive: true, force: true }),
  };
}

/** A host folder as an uncompressed tar stream (the system tar, streamed). */
function tarOf(dir: string): Readable {
  const child = spawn("tar", ["-C", dir, "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] });
  return child.stdout;
}
