import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserServer } from "playwright-core";
import type { TestProject } from "vitest/node";
import { findFreePort } from "@/scripts/services/ports";
import { type RunningBerth, startBerth } from "@/test/e2e/support/berth-server";
import { CHROMIUM_ARGS, CHROMIUM_PATH } from "@/test/e2e/support/chromium";

/** What the e2e files share: one Berth server (as `npm start` runs it) and one Chromium they connect to. */
export type SharedE2e = { url: string; dataDir: string; wsEndpoint: string };

/**
 * Global setup of the `e2e` project (after services.ts): ONE Berth server and ONE Chromium for every e2e
 * file of the run, instead of one of each per file. A server start (migrations, bootstrap, Next, workers)
 * and a browser launch per file were most of the 480 s the project spent outside its tests (of 1,144 s)
 * when each of its 14 files made its own.
 *
 * Started on first use, not here: a run of operations.test.ts alone (which needs a server with its own
 * environment) starts none. The files reach this process through a small loopback HTTP endpoint (its
 * address given with `inject("e2eShared")`): `GET /app` starts both once and answers their addresses when
 * they serve (test/e2e/support/shared-app.ts), `GET /output` the server's last lines, which a failing test
 * prints (the server's output lives in this process, not the test's). Each file seeds its own tenant and
 * closes only its own browser connection (test/e2e/support/e2e-app.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  type Running = { shared: SharedE2e; berth: RunningBerth; browser: BrowserServer };
  let started: Promise<Running> | undefined;
  let running: Running | undefined;
  const dataDir = await mkdtemp(path.join(tmpdir(), "berth-e2e-shared-"));

  const start = async () => {
    // The services of THIS project (services.ts provided them): with several projects in one run, this
    // process' env holds the last project's, as test/setup/services-env.ts explains.
    const { services } = project.getProvidedContext();
    const port = await findFreePort();
    const berth = await startBerth(port, {
      ...process.env,
      DATABASE_URL: services.databaseUrl,
      REDIS_URL: services.redisUrl,
      BERTH_REDIS_PREFIX: services.redisPrefix,
      // As services-env.ts sets it for the processes each test file starts.
      DATABASE_POOL_MAX: process.env.DATABASE_POOL_MAX ?? "8",
      BERTH_DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      // The confined local backend sees only the system and the workspace: the MCP servers the tests
      // declare come from npm, so let the sandbox read this checkout's node_modules (read-only).
      BERTH_SANDBOX_READONLY_PATHS: path.resolve("node_modules"),
    });
    try {
      const browser = await chromium.launchServer({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
      running = { shared: { url: berth.url, dataDir, wsEndpoint: browser.wsEndpoint() }, berth, browser };
      return running;
    } catch (error) {
      await berth.stop();
      throw error;
    }
  };

  const control: Server = createServer((request, response) => {
    const answer = (status: number, body: string, type = "text/plain") => {
      response.writeHead(status, { "content-type": type });
      response.end(body);
    };
    if (request.url === "/app") {
      started ??= start();
      started.then(
        ({ shared }) => answer(200, JSON.stringify(shared), "application/json"),
        (error: Error) => answer(500, error.stack ?? String(error)),
      );
    } else if (request.url === "/output") {
      // Empty before the server serves: a failed start already threw with the server's output.
      answer(200, running?.berth.output() ?? "");
    } else answer(404, "not found");
  });
  // A first start may build Next for minutes: the answer to /app waits for it.
  control.requestTimeout = 0;
  await new Promise<void>((resolve) => control.listen(0, "127.0.0.1", resolve));
  const address = control.address();
  if (!address || typeof address === "string") throw new Error("the e2e control endpoint has no port");
  project.provide("e2eShared", { controlUrl: `http://127.0.0.1:${address.port}` });

  return async () => {
    control.closeAllConnections();
    await new Promise((resolve) => control.close(resolve));
    await started?.catch(() => undefined);
    await running?.browser.close();
    await running?.berth.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    e2eShared: { controlUrl: string };
  }
}
