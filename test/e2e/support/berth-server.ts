import { spawn } from "node:child_process";
import path from "node:path";
import { vi } from "vitest";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..");
const TSX_CLI = path.join(REPO_ROOT, "node_modules", "tsx", "dist", "cli.mjs");

export type RunningBerth = { url: string; output: () => string; stop: () => Promise<void> };

/**
 * Runs Berth exactly as `npm start` does (scripts/start.ts: migrations, bootstrap, `next build` when the
 * sources changed, dashboard + API on one port, workers in-process) against the given services.
 * Resolves once the sign-in page answers; fails fast, with the server's output, if it exits first.
 * The first start of a tree builds Next, which takes minutes on a busy 2-core machine.
 */
export async function startBerth(port: number, env: NodeJS.ProcessEnv): Promise<RunningBerth> {
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [TSX_CLI, "scripts/start.ts"], {
    cwd: REPO_ROOT,
    env: { ...env, HOST: "127.0.0.1", PORT: String(port), BERTH_BASE_URL: url, NEXT_TELEMETRY_DISABLED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let exitCode: number | null | undefined;
  const exited = new Promise<void>((resolve) =>
    child.on("exit", (code) => {
      exitCode = code;
      resolve();
    }),
  );
  const stop = async () => {
    if (exitCode === undefined) {
      child.kill("SIGTERM");
      await exited;
    }
  };

  try {
    await vi.waitFor(
      async () => {
        if (exitCode !== undefined) throw new Error(`berth exited with ${exitCode}:\n${output.slice(-6000)}`);
        if (!output.includes("Berth is running at")) throw new Error("not running yet");
        const response = await fetch(`${url}/sign-in`);
        if (response.status !== 200) throw new Error(`sign-in page answered ${response.status}`);
      },
      { timeout: 840_000, interval: 500 },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, output: () => output, stop };
}
