import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { vi } from "vitest";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..");
const NEXT_BIN = path.join(REPO_ROOT, "node_modules", "next", "dist", "bin", "next");

/** Runs a command to completion, failing with its output (the build log is the diagnosis). */
function run(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`${args.join(" ")} exited with ${code}:\n${output.slice(-4000)}`)),
    );
  });
}

/** `next build` of the current tree (NEXT_TELEMETRY_DISABLED; nothing is fetched at build time). */
export async function buildNextApp(env: NodeJS.ProcessEnv): Promise<void> {
  await run([NEXT_BIN, "build"], { ...env, NEXT_TELEMETRY_DISABLED: "1", NODE_ENV: "production" });
}

export type RunningNextApp = { url: string; logs: () => string; stop: () => Promise<void> };

/**
 * `next start` on a loopback port. Resolves once the sign-in page answers; fails fast, with the
 * server's output, if the process exits first.
 */
export async function startNextApp(port: number, env: NodeJS.ProcessEnv): Promise<RunningNextApp> {
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    process.execPath,
    [NEXT_BIN, "start", "-p", String(port), "-H", "127.0.0.1"],
    {
      cwd: REPO_ROOT,
      env: { ...env, NEXT_TELEMETRY_DISABLED: "1", NODE_ENV: "production", PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let exited: number | null | undefined;
  const exitedPromise = new Promise<void>((resolve) =>
    child.on("exit", (code) => {
      exited = code;
      resolve();
    }),
  );

  const stop = async () => {
    if (exited === undefined) {
      child.kill("SIGTERM");
      await exitedPromise;
    }
  };
  try {
    await vi.waitFor(
      async () => {
        if (exited !== undefined) throw new Error(`next start exited with ${exited}:\n${output}`);
        const response = await fetch(`${url}/sign-in`);
        if (response.status !== 200) throw new Error(`sign-in page answered ${response.status}`);
      },
      { timeout: 90_000, interval: 250 },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, logs: () => output, stop };
}
