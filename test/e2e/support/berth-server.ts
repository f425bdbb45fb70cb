import { findFreePort } from "@/scripts/services/ports";
import { startBerthProcess, waitUntilServing } from "@/test/integration/start/support/start-process";

/** What a test reaches a Berth server by (the shared one of the e2e files, or one of its own). */
export type BerthServer = { url: string };
export type RunningBerth = BerthServer & { output: () => string; stop: () => Promise<void> };

/** The servers this test process started and has not stopped: a failing test prints their output. */
const running = new Set<RunningBerth>();

/** The last lines of every running server's output (LOG_LEVEL=warn: its warnings and errors). */
export function runningServersOutput(lastLines = 80): string[] {
  return [...running].map(
    (berth) =>
      `--- ${berth.url}, last ${lastLines} lines ---\n${berth.output().split("\n").slice(-lastLines).join("\n")}`,
  );
}

/**
 * Runs Berth exactly as `npm start` does (scripts/start.ts: migrations, bootstrap, `next build` when the
 * sources changed, dashboard + API on one port, workers in-process) against the given services.
 * Resolves once the sign-in page answers; fails fast, with the server's output, if it exits first.
 * The first start of a tree builds Next, which takes minutes on a busy 2-core machine.
 */
export async function startBerth(port: number, env: NodeJS.ProcessEnv): Promise<RunningBerth> {
  const url = `http://127.0.0.1:${port}`;
  const berth = startBerthProcess({
    via: "node",
    port,
    // Previews on an origin of their own, as an operator who turns them on sets it.
    env: {
      ...env,
      HOST: "127.0.0.1",
      BERTH_BASE_URL: url,
      BERTH_PREVIEW_PORT: env.BERTH_PREVIEW_PORT ?? String(await findFreePort()),
    },
  });
  const server: RunningBerth = {
    url,
    output: () => berth.lines.join("\n"),
    stop: async () => {
      running.delete(server);
      await berth.stop();
    },
  };
  try {
    await waitUntilServing(berth, url);
  } catch (error) {
    await server.stop();
    throw error;
  }
  running.add(server);
  return server;
}
