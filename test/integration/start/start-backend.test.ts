import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");

/** Runs `npm start`'s entry until it exits (these cases refuse to boot before anything starts). */
function startUntilExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/start.ts"], {
    cwd: repoRoot,
    env: { ...process.env, LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, output })));
}

/** The boot checks of the workspace backend, through the real `npm start` entry (issue 9 A). */
describe("npm start: workspace backend checks", () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-start-backend-"));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it("refuses to boot when bubblewrap does not work, saying what to install or how to opt out", async () => {
    const { code, output } = await startUntilExit({
      BERTH_DATA_DIR: dataDir,
      BERTH_SANDBOX_BWRAP: "/nonexistent/bwrap",
    });
    expect(code).toBe(1);
    expect(output).toContain("the confined workspace backend (bubblewrap) does not work here");
    expect(output).toContain("apt-get install bubblewrap");
    expect(output).toContain("BERTH_WORKSPACE_BACKEND=host-unconfined");
    expect(output).not.toContain("Berth is running");
  });

  it.runIf(process.getuid?.() === 0)("refuses host-unconfined as root unless told twice", async () => {
    const { code, output } = await startUntilExit({
      BERTH_DATA_DIR: dataDir,
      BERTH_WORKSPACE_BACKEND: "host-unconfined",
    });
    expect(code).toBe(1);
    expect(output).toContain("refuses to run as root");
    expect(output).toContain("BERTH_HOST_UNCONFINED_ALLOW_ROOT=1");
  });
});
