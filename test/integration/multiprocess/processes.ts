import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import type { RequestPrincipal } from "@/server/auth/resolve";

export type Child = {
  process: ChildProcessWithoutNullStreams;
  /** Resolves with the next stdout line matching `predicate`. */
  nextLine(predicate?: (line: string) => boolean): Promise<string>;
  exited: Promise<number | null>;
  stderr: () => string;
  /** The last 40 stdout lines no `nextLine` took. */
  unread: () => string;
};

const bundles = new Map<string, string>();

/** The child entry `script` bundled by bundle-child.ts (once per script in this test process). */
export function bundled(script: string): string {
  let file = bundles.get(script);
  if (!file) {
    file = execFileSync(
      process.execPath,
      [
        "--import",
        "tsx",
        path.join(import.meta.dirname, "bundle-child.ts"),
        path.join(import.meta.dirname, script),
      ],
      { encoding: "utf8", cwd: path.resolve(import.meta.dirname, "../../..") },
    );
    bundles.set(script, file);
  }
  return file;
}

/** Starts `script` (a .ts entry in this folder), bundled, with `env` added to the test's environment. */
export function startChild(script: string, env: Record<string, string>): Child {
  const child = spawn(process.execPath, [bundled(script)], {
    // The sandboxed backend shows stdio MCP servers the npm packages the tests run them from.
    env: { BERTH_SANDBOX_READONLY_PATHS: path.resolve("node_modules"), ...process.env, ...env },
    cwd: path.resolve(import.meta.dirname, "../../.."),
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const waiters: { predicate: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  const seen: string[] = [];
  // The last lines a child printed that no test waited for (its log at LOG_LEVEL warn, say).
  const unread: string[] = [];
  createInterface({ input: child.stdout }).on("line", (line) => {
    const index = waiters.findIndex((w) => w.predicate(line));
    if (index >= 0) return waiters.splice(index, 1)[0]!.resolve(line);
    seen.push(line);
    if (unread.push(line) > 40) unread.shift();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    process: child,
    stderr: () => stderr,
    unread: () => unread.join("\n"),
    exited,
    nextLine(predicate = () => true) {
      const index = seen.findIndex(predicate);
      if (index >= 0) return Promise.resolve(seen.splice(index, 1)[0]!);
      return new Promise<string>((resolve, reject) => {
        waiters.push({ predicate, resolve });
        void exited.then((code) =>
          reject(new Error(`${script} exited (${code}) first:\n${stderr.slice(-2000)}`)),
        );
      });
    },
  };
}

/** Ends every child (SIGKILL) and waits for it; after a failed test, prints each one's output tails first. */
export async function stopChildren(children: readonly Child[], failed: boolean): Promise<void> {
  if (failed) {
    for (const child of children)
      console.error(
        `--- child ${child.process.pid} stderr:\n${child.stderr().slice(-3000)}\n--- its stdout:\n${child.unread()}`,
      );
  }
  for (const child of children) child.process.kill("SIGKILL");
  await Promise.all(children.map((child) => child.exited));
}

/** What api-process.ts answers for one `go`. */
export type ResolveResult = { ok: number; workspaceIds: string[]; errors: string[] };

/**
 * One `go` to an api-process.ts child and its answer: `calls` concurrent first uses of `sessionIds` as
 * the tenant's owner (without `request`, the child's MP_* environment says which).
 */
export async function resolveThrough(
  api: Child,
  request?: { tenantId: string; userId: string; sessionIds: readonly string[]; calls: number },
): Promise<ResolveResult> {
  api.process.stdin.write(request ? `go ${JSON.stringify(request)}\n` : "go\n");
  return JSON.parse(await api.nextLine((line) => line.startsWith("{"))) as ResolveResult;
}

/** The MP_CONTROL_DIR of worker-process.ts under `basedir`, with its (empty) provisions.log. */
export async function makeControlDir(basedir: string): Promise<string> {
  const controlDir = path.join(basedir, "control");
  await fs.mkdir(controlDir);
  await fs.writeFile(path.join(controlDir, "provisions.log"), "");
  return controlDir;
}

/** The lines worker-process.ts logged: `start|done <pid> <workspaceId>`. */
export async function readProvisionLog(controlDir: string): Promise<string[]> {
  return (await fs.readFile(path.join(controlDir, "provisions.log"), "utf8")).split("\n").filter(Boolean);
}

/**
 * The tenant owner a web-replica child acts as (MP_USER_ID, MP_USER_EMAIL), as the auth middleware would
 * have resolved it from the request's cookie; the tenant gate still reads the membership from the database.
 */
export function ownerPrincipalFromEnv(): RequestPrincipal {
  return ownerPrincipal(process.env.MP_USER_ID!, process.env.MP_USER_EMAIL!);
}

/** The tenant owner `userId` as the auth middleware resolves it (see ownerPrincipalFromEnv). */
export function ownerPrincipal(userId: string, email: string): RequestPrincipal {
  return { kind: "user", userId, email, name: "owner", authSessionId: "multiprocess-test" };
}

type Answer = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

/**
 * Requests to an installation-process.ts child: each call writes `{"id", "op", ...extra}` and resolves with
 * that id's result (throws with the child's error).
 */
export function installationCalls(child: Child, name: string) {
  let nextId = 0;
  return async (op: string, extra: Record<string, unknown> = {}) => {
    const id = ++nextId;
    child.process.stdin.write(`${JSON.stringify({ id, op, ...extra })}\n`);
    const answer = JSON.parse(await child.nextLine((l) => l.startsWith(`{"id":${id},`))) as Answer;
    if (!answer.ok) throw new Error(`${name} ${op}: ${answer.error}`);
    return answer.result;
  };
}
